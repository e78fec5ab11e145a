package io.statusstore.agent.path;

import io.statusstore.agent.json.JsonTree;
import io.statusstore.agent.status.StatusUpdate;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.BooleanSupplier;

/**
 * The statuses the agent held and then writes through Connect's path: each is watched as the worker's store reads
 * the topic, so that one landing right after a record of its key that no check saw is undone.
 *
 * <p>Rule 3 drops a held status when the worker's store read, before it went out, a tombstone of its key, or another
 * worker's status of it with a higher generation. A record still on its way then is not seen: two workers' agents
 * whose fences end together hand their held statuses of one key to two producers at the same moment, and the one
 * taken first can land last (the owner's UNASSIGNED of a connector after the leader's tombstone of it). So when the
 * store reads a held status landing, and the record of its key read just before it was read after the status was
 * handed out (the checks did not see it) and is one those checks yield to, the agent writes that record again,
 * exactly (a tombstone if it was one), as the sidecar undoes its own late writes. Thread-safe: Connect's reading thread
 * calls {@link #read}, the sender the rest (under the router's lock).
 */
final class LateWrites {
    /** How long a watch lasts: Connect's producer may deliver a record up to its delivery timeout (120 s) late. */
    static final long WATCH_MS = 120_000;
    /** At most this many held statuses are watched (the watch that began longest ago goes first). */
    static final int MAX_WATCHES = 10_000;
    /** The value read last, when nothing of the key was read since the watch began. */
    private static final Object NOTHING = new Object();
    /** A tombstone (a null value) among the values read. */
    private static final Object TOMBSTONE = new Object();

    /** Writes a record again through the worker's own producer, while {@code wanted} says so (it may fail and retry). */
    interface Rewriter {
        void rewrite(String key, byte[] value, BooleanSupplier wanted);
    }

    private static final class Watch {
        final StatusUpdate update;
        final boolean tookTombstone;
        final long since;
        /** The last record of the key read since the watch began (NOTHING, TOMBSTONE or its value). */
        Object last = NOTHING;
        /** The undo asked for last and not yet followed by any read of the key, or null. */
        Object undoing;

        Watch(StatusUpdate update, boolean tookTombstone, long since) {
            this.update = update;
            this.tookTombstone = tookTombstone;
            this.since = since;
        }
    }

    private final Map<String, Watch> watches = new LinkedHashMap<>();
    private volatile Rewriter rewriter;
    /** Told of each undo (outside the lock): the held status, and what it landed over. */
    private volatile Undone undone = (update, over) -> { };

    /** Who is told of an undo: a log line and a count. */
    interface Undone {
        void undone(StatusUpdate update, String over);
    }

    void rewriteWith(Rewriter writer) {
        rewriter = writer;
    }

    void onUndone(Undone listener) {
        undone = listener;
    }

    /**
     * A held status is handed to Connect's path now, its checks made: records of its key read from now on were not
     * seen by them. {@code tookTombstone}: the agent took a tombstone of the key itself, so a tombstone read may be its
     * own, older than this status (rule 3 yields to none then, and neither does the undo).
     */
    synchronized void begin(StatusUpdate update, boolean tookTombstone, long now) {
        watches.remove(update.key);
        if (update.kind == StatusUpdate.Kind.TOPIC || update.kind == StatusUpdate.Kind.DELETE_TOPIC
                || KeyTable.tombstone(update)) {
            // A deletion yields to nothing (Connect's put of DESTROYED is unconditional); topic statuses are no one's.
            return;
        }
        watches.put(update.key, new Watch(update, tookTombstone, now));
        Iterator<Watch> oldest = watches.values().iterator();
        while (oldest.hasNext()) {
            Watch w = oldest.next();
            if (now - w.since <= WATCH_MS && watches.size() <= MAX_WATCHES) {
                break;
            }
            oldest.remove();
        }
    }

    /** A newer write of {@code key} is taken: it lands after the held one, which needs no watch any more. */
    synchronized void end(String key) {
        watches.remove(key);
    }

    /** A record Connect's store read (a null value is a tombstone); cheap for a key no one watches. */
    void read(String key, byte[] value, long now) {
        Object again;
        Watch undo;
        synchronized (this) {
            Watch w = watches.get(key);
            if (w == null) {
                return;
            }
            if (now - w.since > WATCH_MS) {
                watches.remove(key);
                return;
            }
            w.undoing = null;
            Object before = w.last;
            w.last = value == null ? TOMBSTONE : value;
            if (!ReadBack.matches(w.update, value) || !yieldsTo(w, before)) {
                return;
            }
            again = before;
            w.undoing = before;
            undo = w;
        }
        Rewriter writer = rewriter;
        if (writer == null) {
            return;
        }
        undone.undone(undo.update, again == TOMBSTONE ? "a tombstone" : "another worker's newer status");
        writer.rewrite(key, again == TOMBSTONE ? null : (byte[]) again, () -> wanted(undo, again));
    }

    private synchronized boolean wanted(Watch w, Object again) {
        return watches.get(w.update.key) == w && w.undoing == again;
    }

    /**
     * Whether the held status yields to {@code before}, the record of its key read last before it landed and after it
     * went out: a tombstone the agent may not have written itself, or another worker's status of a higher generation
     * (Connect's safe-write rule, as rule 3 applies it to every held status).
     */
    private static boolean yieldsTo(Watch w, Object before) {
        if (before == NOTHING) {
            return false;
        }
        if (before == TOMBSTONE) {
            return !w.tookTombstone;
        }
        Object json;
        try {
            json = JsonTree.parse((byte[]) before);
        } catch (IllegalArgumentException e) {
            return false;
        }
        if (!(json instanceof Map)) {
            return false;
        }
        Object worker = ((Map<?, ?>) json).get("worker_id");
        Object generation = ((Map<?, ?>) json).get("generation");
        return worker instanceof String && !worker.equals(w.update.workerId) && generation instanceof Number
                && ((Number) generation).longValue() > w.update.generation;
    }
}
