package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The {@link KeyTable}'s whole-table moves, rare and visiting every key once: leaving the sidecar (each key's fence,
 * then its newest write to Connect's path, the oldest first) and the sidecar's restart (the keys pending at the old
 * instance held until its lease and write bound passed). Not thread-safe: the {@link Router} guards it.
 */
final class KeyMoves {
    private final Map<String, KeyEntry> entries;
    private final KeyOrders orders;
    private final List<StatusUpdate> abandoned = new ArrayList<>();

    KeyMoves(Map<String, KeyEntry> entries, KeyOrders orders) {
        this.entries = entries;
        this.orders = orders;
    }

    /**
     * The sidecar restarted: each key pending there is sent again (its newest write, under a new seq from
     * {@code nextSeq}), not before {@code holdUntil}: until the old instance's lease ended, it may still write those
     * keys. A newer write of such a key already on its way to the new instance is sent once more after the hold
     * too, so that it lands after anything the old instance writes late. Visits every key (a restart is rare).
     */
    int resendPending(long holdUntil, LongSupplier nextSeq) {
        List<KeyEntry> wasPending = new ArrayList<>();
        for (KeyEntry entry : entries.values()) {
            if (entry.pending != null) {
                wasPending.add(entry);
            }
            orders.forgetReplaced(entry);
        }
        // Sent again in the order they were first sent.
        wasPending.sort(Comparator.comparingLong(e -> e.pending.seq));
        for (KeyEntry entry : wasPending) {
            orders.detach(entry);
            if (entry.unsent == null) {
                entry.unsent = (entry.sending != null ? entry.sending : entry.pending).withSeq(nextSeq.getAsLong());
            }
            entry.pending = null;
            entry.heldUntil = Math.max(entry.heldUntil, holdUntil);
            entry.holding = true;
            orders.attach(entry);
        }
        return wasPending.size();
    }

    /** The earliest time after {@code now} a held key may be sent, or -1 when none is held. */
    long nextRelease(long now) {
        orders.releaseHolds(now);
        return orders.held.isEmpty() ? -1 : orders.held.first().heldUntil;
    }

    /**
     * Leaving the sidecar: a key with something there (on its way, pending, or held for an old instance) waits
     * until {@code sidecarFence}, or its hold if later; a key with nothing there may go through Connect at once.
     * Visits every key, once per leaving. Returns how many keys wait.
     */
    int fence(long sidecarFence) {
        int waiting = 0;
        for (KeyEntry entry : entries.values()) {
            orders.detach(entry);
            boolean there = entry.atSidecar();
            entry.leaving = true;
            entry.pastFence = false;
            entry.fenceUntil = Math.max(there ? sidecarFence : Long.MIN_VALUE, entry.heldUntil);
            if (there || entry.heldUntil > 0) {
                waiting++;
            }
            orders.attach(entry);
        }
        return waiting;
    }

    /**
     * The newest write of the key, among those past their fence, whose newest write is the oldest: what Connect's
     * own path must write for it now (made unconditional if an older unconditional write of the key is unsettled),
     * or null. The key stays in the table, empty, until {@link #drained}: a write of it meanwhile waits there, so
     * that it cannot reach Connect's producer before this one. A key deleted since its newest write was taken
     * ({@link KeyEntry#deleted}) leaves the table instead, its write abandoned ({@link #takeAbandoned}).
     */
    StatusUpdate takeReady(long now) {
        orders.passFences(now);
        while (!orders.drainable.isEmpty()) {
            KeyEntry ready = orders.drainable.firstEntry().getValue();
            orders.detach(ready);
            StatusUpdate newest = ready.newest();
            boolean unconditional = ready.holdsUnconditional();
            ready.unsent = null;
            ready.sending = null;
            ready.pending = null;
            ready.verifying = null;
            ready.givenBackSince = -1;
            orders.forgetReplaced(ready);
            if (ready.deleted) {
                // Its key deleted since it was taken: late, it would land over the tombstone (KeyEntry.deleted).
                entries.remove(ready.key);
                abandoned.add(newest);
                continue;
            }
            ready.draining = true;
            orders.attach(ready);
            return newest.safe && unconditional ? newest.unconditional() : newest;
        }
        return null;
    }

    /** The writes {@link #takeReady} abandoned since the last call (their keys deleted meanwhile), for a log line. */
    List<StatusUpdate> takeAbandoned() {
        if (abandoned.isEmpty()) {
            return Collections.emptyList();
        }
        List<StatusUpdate> taken = new ArrayList<>(abandoned);
        abandoned.clear();
        return taken;
    }

    /** Connect's own path took the write {@link #takeReady} gave out: its key leaves the table unless written again. */
    void drained(StatusUpdate update) {
        KeyEntry entry = entries.get(update.key);
        if (entry != null && entry.draining) {
            orders.detach(entry);
            entry.draining = false;
            orders.attach(entry);
            if (entry.empty()) {
                orders.forgetReplaced(entry);
                entries.remove(entry.key);
            }
        }
    }

    /**
     * Whether a key waiting for its fence has a write whose attempt may still be under way at the sidecar
     * ({@link KeyEntry#mayBeInFlight}). Visits the keys waiting for their fence (only while the agent asks the sidecar
     * for their outcomes, after it ended the lease).
     */
    boolean fencedInFlight() {
        for (KeyEntry entry : orders.fenced) {
            if (entry.mayBeInFlight()) {
                return true;
            }
        }
        return false;
    }

    /**
     * The sidecar answered that the session's lease ended: it starts no attempt of the session's writes from then on.
     * So a key waiting for its fence none of whose writes may still be under way there (each has its outcome: written,
     * or given back) can land nothing more from the sidecar, and goes through Connect now (or once its hold for an old
     * instance passed). Returns how many keys it freed.
     */
    int liftSettled() {
        List<KeyEntry> free = new ArrayList<>();
        for (KeyEntry entry : orders.fenced) {
            if (!entry.mayBeInFlight()) {
                free.add(entry);
            }
        }
        for (KeyEntry entry : free) {
            orders.detach(entry);
            entry.fenceUntil = entry.heldUntil;
            orders.attach(entry);
        }
        return free.size();
    }

    /** The earliest fence after {@code now} of a key waiting for it, or -1 when none waits. */
    long nextFence(long now) {
        orders.passFences(now);
        return orders.fenced.isEmpty() ? -1 : orders.fenced.first().fenceUntil;
    }
}
