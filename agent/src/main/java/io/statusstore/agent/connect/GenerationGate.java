package io.statusstore.agent.connect;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Keeps Connect's retry rule from judging a failed write against a held status's older generation. The store's
 * original method, which the agent runs for a status it held, sets the store's generation to that status's own under
 * the store's lock and serializes the record after it; the agent takes the generation back up only as the record goes
 * to the producer ({@link StoreGeneration}). Connect judges the retry of a failed write in its producer callback,
 * against the generation then: a callback in that window would see the held status's generation, and send an older
 * status of it again over its key's newer one, or abandon a newer status. So the agent's write of a held status shuts
 * the gate through that window, and Connect's callbacks of the store's records run behind it ({@link SendCount}).
 * Both waits are bounded: past {@link #WAIT_MS} each goes on as Connect's own code does.
 */
final class GenerationGate {
    /** The longest a callback, or a held status's write, waits for the gate. */
    static final long WAIT_MS = 5_000;

    private final ReentrantLock lock = new ReentrantLock();

    /** A held status's write is about to run the store's original method; returns whether the gate shut. */
    boolean shut() {
        try {
            return lock.tryLock(WAIT_MS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** The store's generation is back where the worker moved it: the gate opens, if this thread shut it. */
    void open() {
        if (lock.isHeldByCurrentThread()) {
            lock.unlock();
        }
    }

    /** Runs Connect's callback once no held status's write is in the window (or after the bound). */
    void judge(Runnable callback) {
        boolean waited = shut();
        try {
            callback.run();
        } finally {
            if (waited) {
                lock.unlock();
            }
        }
    }
}
