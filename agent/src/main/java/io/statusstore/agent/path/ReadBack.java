package io.statusstore.agent.path;

import io.statusstore.agent.json.JsonTree;
import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayDeque;
import java.util.Collections;
import java.util.Deque;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.BiConsumer;
import java.util.function.Consumer;

/**
 * What the worker's own status store reads back from the status topic, for the keys whose writes the sidecar was
 * given: the check of its "written" (rule 4). Connect's store reads every record of the topic; the agent keeps, per
 * watched key, the last few values read since its write went out. Thread-safe: Connect's reading thread calls
 * {@link #read}, the agent's sender the rest.
 */
public final class ReadBack {
    /** Values kept per watched key: the newest few are enough, a write is looked for soon after it went out. */
    private static final int VALUES_PER_KEY = 8;
    /** A sentinel for a tombstone (a null value) among the values read. */
    private static final Object TOMBSTONE = new Object();

    private final int capacity;
    private final long keepMs;
    /** Watched keys, in the order their watch last began, with the values read since. */
    private final LinkedHashMap<String, Watch> watched = new LinkedHashMap<>(16, 0.75f, false);
    /** Watched keys read since the sender last looked ({@link #takeRead}): it checks those, not every key. */
    private Set<String> readSince = new LinkedHashSet<>();
    /** Told (outside this object's lock) when a watched key was read. */
    private volatile Runnable onWatchedRead = () -> { };
    /** Told (outside this object's lock) of every tombstone read, watched or not. */
    private volatile Consumer<String> onTombstone = key -> { };
    /** Told (outside this object's lock, last) of every record read: the held statuses written late are watched. */
    private volatile BiConsumer<String, byte[]> onEveryRead = (key, value) -> { };

    /**
     * A key's values are kept {@code keepMs} after its last watch began, then forgotten, and at most {@code capacity}
     * keys are watched (the watch that began longest ago goes first).
     */
    public ReadBack(int capacity, long keepMs) {
        this.capacity = capacity;
        this.keepMs = keepMs;
    }

    /** Whom to tell when a watched key was read (the router, whose sender then looks). */
    void onWatchedRead(Runnable listener) {
        onWatchedRead = listener;
    }

    /** Whom to tell of each tombstone read (the router: a key deleted meanwhile is not written late). */
    void onTombstone(Consumer<String> listener) {
        onTombstone = listener;
    }

    /** Whom to tell of every record read, after the rest ({@link LateWrites}). */
    void onEveryRead(BiConsumer<String, byte[]> listener) {
        onEveryRead = listener;
    }

    /**
     * A write of {@code key} goes out now, or the sidecar says it wrote it: values of it read from now on are kept
     * (with those read since an earlier watch of it).
     */
    synchronized void watch(String key, long now) {
        Watch w = watched.remove(key);
        if (w == null) {
            w = new Watch();
        }
        w.since = now;
        watched.put(key, w);
        Iterator<Watch> oldest = watched.values().iterator();
        while (oldest.hasNext()) {
            if (now - oldest.next().since <= keepMs && watched.size() <= capacity) {
                break;
            }
            oldest.remove();
        }
    }

    /** A record Connect's store read (a null value is a tombstone); cheap for a key no one watches. */
    public void read(String key, byte[] value) {
        if (key == null) {
            return;
        }
        if (value == null) {
            onTombstone.accept(key);
        }
        boolean isWatched;
        synchronized (this) {
            Watch w = watched.get(key);
            isWatched = w != null;
            if (isWatched) {
                w.values.addLast(value == null ? TOMBSTONE : value);
                if (w.values.size() > VALUES_PER_KEY) {
                    w.values.removeFirst();
                }
                readSince.add(key);
            }
        }
        if (isWatched) {
            onWatchedRead.run();
        }
        onEveryRead.accept(key, value);
    }

    /** The watched keys read since the last call. */
    synchronized Set<String> takeRead() {
        if (readSince.isEmpty()) {
            return Collections.emptySet();
        }
        Set<String> read = readSince;
        readSince = new LinkedHashSet<>();
        return read;
    }

    /** Whether a value read since the key's watch began is {@code update}'s (its state, worker, generation). */
    synchronized boolean seen(StatusUpdate update) {
        Watch w = watched.get(update.key);
        if (w == null) {
            return false;
        }
        for (Object value : w.values) {
            if (matches(update, value == TOMBSTONE ? null : (byte[]) value)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Whether the record value is the one {@code update} writes, as Connect's store would read it: a tombstone for a
     * DESTROYED status and a topic status's deletion; otherwise the fields that make the status (the trace may be cut
     * to fit a record, a version is not compared).
     */
    static boolean matches(StatusUpdate update, byte[] value) {
        boolean tombstone = update.kind == StatusUpdate.Kind.DELETE_TOPIC
                || (update.kind != StatusUpdate.Kind.TOPIC && "DESTROYED".equals(update.state));
        if (value == null || tombstone) {
            return value == null && tombstone;
        }
        Object json;
        try {
            json = JsonTree.parse(value);
        } catch (IllegalArgumentException e) {
            return false;
        }
        if (!(json instanceof Map)) {
            return false;
        }
        Map<?, ?> map = (Map<?, ?>) json;
        if (update.kind == StatusUpdate.Kind.TOPIC) {
            Object topic = map.get("topic");
            if (!(topic instanceof Map)) {
                return false;
            }
            Map<?, ?> t = (Map<?, ?>) topic;
            return Objects.equals(update.topic, t.get("name")) && Objects.equals(update.connector, t.get("connector"))
                    && Objects.equals((long) update.task, t.get("task"))
                    && Objects.equals(update.discoverTimestamp, t.get("discoverTimestamp"));
        }
        return Objects.equals(update.state, map.get("state")) && Objects.equals(update.workerId, map.get("worker_id"))
                && Objects.equals((long) update.generation, map.get("generation"));
    }

    private static final class Watch {
        long since;
        final Deque<Object> values = new ArrayDeque<>();
    }
}
