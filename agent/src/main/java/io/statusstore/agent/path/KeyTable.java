package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The agent's table of statuses not yet settled, bounded by keys, not by writes.
 *
 * <p>Each key has up to three slots: {@code unsent} (the newest write not yet handed over: a newer write
 * replaces it), {@code sending} (in the request now on its way) and {@code pending} (accepted by the sidecar,
 * outcome not yet known). A key leaves the table when all three are empty. Not thread-safe: the
 * {@link Router} guards it.
 */
final class KeyTable {
    private static final Comparator<StatusUpdate> BY_SEQ = Comparator.comparingLong(u -> u.seq);

    private final Map<String, Entry> entries = new HashMap<>();
    private final int maxKeys;

    KeyTable(int maxKeys) {
        this.maxKeys = maxKeys;
    }

    /**
     * Takes a write into its key's unsent slot, replacing an older unsent one. Returns false, taking nothing,
     * when the key is not in the table and the table is full.
     *
     * <p>A putSafe over an older unconditional write of the same key that may not be written yet becomes
     * unconditional: had the older one been written first, the newer would have passed Connect's safe-write
     * rule as the same worker's write (a putSafe is dropped only over another worker's status of a newer
     * generation), so judging it alone could drop what Connect would write.
     */
    boolean offer(StatusUpdate update) {
        Entry entry = entries.get(update.key);
        if (entry == null) {
            if (entries.size() >= maxKeys) {
                return false;
            }
            entry = new Entry();
            entries.put(update.key, entry);
        }
        entry.unsent = update.safe && entry.holdsUnconditional() ? update.unconditional() : update;
        return true;
    }

    /**
     * Moves up to {@code max} unsent writes, oldest first, to their sending slot and returns them; keys held
     * (see {@link #resendPending}) until after {@code now} wait.
     */
    List<StatusUpdate> takeBatch(int max, long now) {
        List<StatusUpdate> unsent = new ArrayList<>();
        for (Entry entry : entries.values()) {
            if (entry.unsent != null && entry.sending == null && entry.heldUntil <= now) {
                unsent.add(entry.unsent);
            }
        }
        if (unsent.isEmpty()) {
            return Collections.emptyList();
        }
        unsent.sort(BY_SEQ);
        List<StatusUpdate> batch = unsent.size() > max ? new ArrayList<>(unsent.subList(0, max)) : unsent;
        for (StatusUpdate update : batch) {
            Entry entry = entries.get(update.key);
            entry.sending = update;
            entry.unsent = null;
        }
        return batch;
    }

    /** The sidecar took a sent write and will report its outcome: it replaces any older pending write. */
    void accepted(StatusUpdate update) {
        Entry entry = entries.get(update.key);
        if (entry != null && entry.sending == update) {
            entry.sending = null;
            entry.pending = update;
        }
    }

    /** The sidecar settled a sent write at once (dropped or refused). */
    void settledOnArrival(StatusUpdate update) {
        Entry entry = entries.get(update.key);
        if (entry != null && entry.sending == update) {
            entry.sending = null;
            removeIfEmpty(update.key, entry);
        }
    }

    /** A sent write the sidecar did not take: it is unsent again, unless a newer write of its key is. */
    void returned(StatusUpdate update) {
        Entry entry = entries.get(update.key);
        if (entry != null && entry.sending == update) {
            entry.sending = null;
            if (entry.unsent == null) {
                entry.unsent = update;
            }
        }
    }

    /** An outcome settles the pending write it names; returns whether it did (an older write's is ignored). */
    boolean settle(String key, long seq) {
        Entry entry = entries.get(key);
        if (entry == null || entry.pending == null || entry.pending.seq != seq) {
            return false;
        }
        entry.pending = null;
        removeIfEmpty(key, entry);
        return true;
    }

    /**
     * The sidecar restarted: what was pending there is to be sent again (the newest write of each key), not
     * before {@code holdUntil}: until the old instance's lease ended, it may still write those keys.
     */
    int resendPending(long holdUntil) {
        int count = 0;
        for (Entry entry : entries.values()) {
            if (entry.pending != null) {
                if (entry.unsent == null && entry.sending == null) {
                    entry.unsent = entry.pending;
                }
                entry.pending = null;
                entry.heldUntil = Math.max(entry.heldUntil, holdUntil);
                count++;
            }
        }
        return count;
    }

    /** The earliest time after {@code now} a held key may be sent, or -1 when none is held. */
    long nextRelease(long now) {
        long next = -1;
        for (Entry entry : entries.values()) {
            if (entry.unsent != null && entry.heldUntil > now && (next < 0 || entry.heldUntil < next)) {
                next = entry.heldUntil;
            }
        }
        return next;
    }

    /**
     * Removes the key whose newest unsettled write is the oldest, and returns that write: what Connect's own
     * path must write for it (made unconditional if an older unconditional write of the key is unsettled).
     */
    StatusUpdate takeOldest() {
        String oldestKey = null;
        StatusUpdate oldest = null;
        for (Map.Entry<String, Entry> e : entries.entrySet()) {
            StatusUpdate newest = e.getValue().newest();
            if (oldest == null || newest.seq < oldest.seq) {
                oldest = newest;
                oldestKey = e.getKey();
            }
        }
        if (oldest == null) {
            return null;
        }
        Entry entry = entries.remove(oldestKey);
        return oldest.safe && entry.holdsUnconditional() ? oldest.unconditional() : oldest;
    }

    /** The lowest number of any write still unsettled, or -1 when the table is empty. */
    long lowestUnsettledSeq() {
        long lowest = -1;
        for (Entry entry : entries.values()) {
            for (StatusUpdate u : entry.slots()) {
                if (u != null && (lowest < 0 || u.seq < lowest)) {
                    lowest = u.seq;
                }
            }
        }
        return lowest;
    }

    boolean hasUnsent() {
        for (Entry entry : entries.values()) {
            if (entry.unsent != null) {
                return true;
            }
        }
        return false;
    }

    boolean hasPending() {
        for (Entry entry : entries.values()) {
            if (entry.pending != null) {
                return true;
            }
        }
        return false;
    }

    int size() {
        return entries.size();
    }

    boolean isEmpty() {
        return entries.isEmpty();
    }

    private void removeIfEmpty(String key, Entry entry) {
        if (entry.unsent == null && entry.sending == null && entry.pending == null) {
            entries.remove(key);
        }
    }

    private static final class Entry {
        StatusUpdate unsent;
        StatusUpdate sending;
        StatusUpdate pending;
        /** Not sent before this time (ms): an old sidecar instance may still write this key until then. */
        long heldUntil;

        StatusUpdate newest() {
            return unsent != null ? unsent : sending != null ? sending : pending;
        }

        /** Whether an unconditional write of this key is unsettled (it may be written yet, or not). */
        boolean holdsUnconditional() {
            return (unsent != null && !unsent.safe) || (sending != null && !sending.safe)
                    || (pending != null && !pending.safe);
        }

        StatusUpdate[] slots() {
            return new StatusUpdate[] {unsent, sending, pending};
        }
    }
}
