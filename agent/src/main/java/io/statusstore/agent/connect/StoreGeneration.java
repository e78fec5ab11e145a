package io.statusstore.agent.connect;

import java.lang.reflect.Field;

/**
 * The store's generation, as Connect's retry rule reads it: the generation of the last status the store's original
 * method was handed (its {@code send} sets it, under the store's lock), and a failed status write is abandoned once it
 * differs from the status's own. The agent's drain hands the original method statuses it held, older than what the
 * worker has asked for since: the drain must not take the generation back, or Connect would abandon the retry of a
 * newer status then in flight. A store without the field (another Connect) is left as it is.
 */
final class StoreGeneration {
    private final Object store;
    private final Field field;

    StoreGeneration(Object store) {
        this.store = store;
        this.field = find(store.getClass());
    }

    /** The generation now (0 when the store has no such field). */
    int read() {
        if (field == null) {
            return 0;
        }
        synchronized (store) {
            try {
                return field.getInt(store);
            } catch (IllegalAccessException e) {
                return 0;
            }
        }
    }

    /** Moves the generation back up to {@code generation} if a drained status took it lower. */
    void atLeast(int generation) {
        if (field == null) {
            return;
        }
        synchronized (store) {
            try {
                if (field.getInt(store) < generation) {
                    field.setInt(store, generation);
                }
            } catch (IllegalAccessException e) {
                // Left as it is: Connect's own rule then applies as the drain left it.
            }
        }
    }

    private static Field find(Class<?> type) {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField("generation");
                if (f.getType() != int.class) {
                    return null;
                }
                f.setAccessible(true);
                return f;
            } catch (NoSuchFieldException e) {
                // look in the superclass
            } catch (RuntimeException e) {
                return null;
            }
        }
        return null;
    }
}
