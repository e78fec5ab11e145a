package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The agent's table of statuses not yet settled, bounded by keys, not by writes.
 *
 * <p>Each key has up to four slots: {@code unsent} (the newest write not yet handed over: a newer write
 * replaces it), {@code sending} (in the request now on its way, or in one whose answer never came: it may be at
 * the sidecar), {@code pending} (accepted by the sidecar, outcome not yet known) and {@code verifying} (the sidecar
 * says it wrote it; the worker's own store has not read it back yet). A key leaves the table when all four are
 * empty. Leaving the sidecar, each key gets its fence: the time after which nothing the sidecar took
 * of it can land (at once for a key with nothing there); past it, Connect's own path writes the key's newest.
 * Not thread-safe: the {@link Router} guards it.
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
     * when the key is not in the table and either {@code newKeys} is false or the table is full.
     *
     * <p>A putSafe over an older unconditional write of the same key that may not be written yet becomes
     * unconditional: had the older one been written first, the newer would have passed Connect's safe-write
     * rule as the same worker's write (a putSafe is dropped only over another worker's status of a newer
     * generation), so judging it alone could drop what Connect would write.
     */
    boolean offer(StatusUpdate update, boolean newKeys) {
        Entry entry = entries.get(update.key);
        if (entry == null) {
            if (!newKeys || entries.size() >= maxKeys) {
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
     * (see {@link #resendPending}) until after {@code now} wait, and so do keys whose last request went unanswered.
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
    void accepted(StatusUpdate update, long now) {
        Entry entry = entries.get(update.key);
        if (entry != null && entry.sending == update) {
            entry.sending = null;
            entry.pending = update;
            entry.pendingSince = now;
        }
    }

    /** The sidecar settled a sent write at once (dropped, refused, or an outcome it had already). */
    void settledOnArrival(StatusUpdate update) {
        Entry entry = entries.get(update.key);
        if (entry != null && entry.sending == update) {
            entry.sending = null;
            removeIfEmpty(update.key, entry);
        }
    }

    /** A sent write the sidecar surely did not take: it is unsent again, unless a newer write of its key is. */
    void returned(StatusUpdate update) {
        Entry entry = entries.get(update.key);
        if (entry != null && entry.sending == update) {
            entry.sending = null;
            if (entry.unsent == null) {
                entry.unsent = update;
            }
        }
    }

    /**
     * The sidecar will not write this write (any more): it is the agent's again, unsent as {@code again} (the same
     * write under a new seq), unless a newer write of its key is unsent or on its way. Returns whether it was in
     * a slot (sending or pending) to take back.
     */
    boolean takeBack(StatusUpdate update, StatusUpdate again) {
        Entry entry = entries.get(update.key);
        if (entry == null) {
            return false;
        }
        if (entry.sending == update) {
            entry.sending = null;
        } else if (entry.pending != null && entry.pending.seq == update.seq) {
            entry.pending = null;
        } else {
            return false;
        }
        if (entry.unsent == null && entry.sending == null) {
            entry.unsent = again;
        }
        return true;
    }

    /** The pending write {@code seq} of {@code key}, or null. */
    StatusUpdate pending(String key, long seq) {
        Entry entry = entries.get(key);
        return entry != null && entry.pending != null && entry.pending.seq == seq ? entry.pending : null;
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
     * The sidecar says it wrote the pending (or, sent again, the sending) write {@code seq} of {@code key}: it is
     * checked against what the worker's store reads back until {@code until}. Returns whether it named one.
     */
    boolean written(String key, long seq, long until) {
        Entry entry = entries.get(key);
        if (entry == null) {
            return false;
        }
        StatusUpdate written;
        if (entry.pending != null && entry.pending.seq == seq) {
            written = entry.pending;
            entry.pending = null;
        } else if (entry.sending != null && entry.sending.seq == seq) {
            written = entry.sending;
            entry.sending = null;
        } else {
            return false;
        }
        if (entry.verifying == null || entry.verifying.seq < written.seq) {
            entry.verifying = written;
            entry.verifyUntil = until;
        }
        return true;
    }

    /**
     * Settles each write the worker's store read back; returns one whose time to be read back has passed without it
     * (the sidecar said it wrote what it did not), or null.
     */
    StatusUpdate verify(ReadBack readBack, long now) {
        StatusUpdate unseen = null;
        for (Iterator<Map.Entry<String, Entry>> it = entries.entrySet().iterator(); it.hasNext();) {
            Entry entry = it.next().getValue();
            if (entry.verifying == null) {
                continue;
            }
            if (readBack.seen(entry.verifying)) {
                entry.verifying = null;
                if (entry.empty()) {
                    it.remove();
                }
            } else if (now > entry.verifyUntil && unseen == null) {
                unseen = entry.verifying;
            }
        }
        return unseen;
    }

    /** The earliest time a write the sidecar says it wrote must have been read back, or -1. */
    long nextVerifyDeadline() {
        long next = -1;
        for (Entry entry : entries.values()) {
            if (entry.verifying != null && (next < 0 || entry.verifyUntil < next)) {
                next = entry.verifyUntil;
            }
        }
        return next;
    }

    /**
     * The sidecar restarted: each key pending there is sent again (its newest write, under a new seq from
     * {@code nextSeq}), not before {@code holdUntil}: until the old instance's lease ended, it may still write those
     * keys. A newer write of such a key already on its way to the new instance is sent once more after the hold
     * too, so that it lands after anything the old instance writes late.
     */
    int resendPending(long holdUntil, LongSupplier nextSeq) {
        int count = 0;
        for (Entry entry : entries.values()) {
            if (entry.pending != null) {
                if (entry.unsent == null) {
                    entry.unsent = (entry.sending != null ? entry.sending : entry.pending).withSeq(nextSeq.getAsLong());
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
     * Leaving the sidecar: a key with something there (on its way, pending, or held for an old instance) waits
     * until {@code sidecarFence}, or its hold if later; a key with nothing there may go through Connect at once.
     * Returns how many keys wait.
     */
    int fence(long sidecarFence) {
        int waiting = 0;
        for (Entry entry : entries.values()) {
            boolean there = entry.sending != null || entry.pending != null || entry.verifying != null;
            entry.fenceUntil = Math.max(there ? sidecarFence : Long.MIN_VALUE, entry.heldUntil);
            if (there || entry.heldUntil > 0) {
                waiting++;
            }
        }
        return waiting;
    }

    /**
     * The newest write of the key, among those past their fence, whose newest write is the oldest: what Connect's
     * own path must write for it now (made unconditional if an older unconditional write of the key is unsettled),
     * or null. The key stays in the table, empty, until {@link #drained}: a write of it meanwhile waits there, so
     * that it cannot reach Connect's producer before this one.
     */
    StatusUpdate takeReady(long now) {
        Entry ready = null;
        StatusUpdate oldest = null;
        for (Entry entry : entries.values()) {
            StatusUpdate newest = entry.newest();
            if (!entry.draining && newest != null && entry.fenceUntil <= now && (oldest == null || newest.seq < oldest.seq)) {
                oldest = newest;
                ready = entry;
            }
        }
        if (ready == null) {
            return null;
        }
        boolean unconditional = ready.holdsUnconditional();
        ready.unsent = null;
        ready.sending = null;
        ready.pending = null;
        ready.verifying = null;
        ready.draining = true;
        return oldest.safe && unconditional ? oldest.unconditional() : oldest;
    }

    /** Connect's own path took the write {@link #takeReady} gave out: its key leaves the table unless written again. */
    void drained(StatusUpdate update) {
        Entry entry = entries.get(update.key);
        if (entry != null && entry.draining) {
            entry.draining = false;
            removeIfEmpty(update.key, entry);
        }
    }

    /** The earliest fence after {@code now} of a key waiting for it, or -1 when none waits. */
    long nextFence(long now) {
        long next = -1;
        for (Entry entry : entries.values()) {
            if (entry.fenceUntil > now && (next < 0 || entry.fenceUntil < next)) {
                next = entry.fenceUntil;
            }
        }
        return next;
    }

    /** The lowest number of any write whose outcome the agent still waits for, or -1 when there is none. */
    long lowestUnsettledSeq() {
        long lowest = -1;
        for (Entry entry : entries.values()) {
            for (StatusUpdate u : entry.awaitingOutcome()) {
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

    /** The pending writes accepted at or before {@code since}, oldest first. */
    List<StatusUpdate> pendingSince(long since) {
        List<StatusUpdate> old = new ArrayList<>();
        for (Entry entry : entries.values()) {
            if (entry.pending != null && entry.pendingSince <= since) {
                old.add(entry.pending);
            }
        }
        old.sort(BY_SEQ);
        return old;
    }

    int size() {
        return entries.size();
    }

    boolean isEmpty() {
        return entries.isEmpty();
    }

    private void removeIfEmpty(String key, Entry entry) {
        if (entry.empty()) {
            entries.remove(key);
        }
    }

    private static final class Entry {
        StatusUpdate unsent;
        StatusUpdate sending;
        StatusUpdate pending;
        StatusUpdate verifying;
        /** When the sidecar accepted the pending write (ms). */
        long pendingSince;
        /** By when the verifying write must have been read back (ms). */
        long verifyUntil;
        /** Not sent before this time (ms): an old sidecar instance may still write this key until then. */
        long heldUntil;
        /** Leaving the sidecar: not written through Connect before this time (ms). */
        long fenceUntil = Long.MAX_VALUE;
        /** Connect's own path is being handed this key's newest write. */
        boolean draining;

        StatusUpdate newest() {
            return unsent != null ? unsent : sending != null ? sending : pending != null ? pending : verifying;
        }

        boolean empty() {
            return unsent == null && sending == null && pending == null && verifying == null && !draining;
        }

        /** Whether an unconditional write of this key is unsettled (it may be written yet, or not). */
        boolean holdsUnconditional() {
            return (unsent != null && !unsent.safe) || (sending != null && !sending.safe)
                    || (pending != null && !pending.safe) || (verifying != null && !verifying.safe);
        }

        StatusUpdate[] awaitingOutcome() {
            return new StatusUpdate[] {unsent, sending, pending};
        }
    }
}
