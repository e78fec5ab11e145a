package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * One key of the {@link KeyTable}: its writes not yet settled, one per slot, and the times the table orders keys by.
 * Its fields change only between {@link KeyTable}'s detach and attach, which keep the table's orderings true.
 */
final class KeyEntry {
    static final Comparator<KeyEntry> BY_HOLD = order(e -> e.heldUntil);
    static final Comparator<KeyEntry> BY_PENDING_SINCE = order(e -> e.pendingSince);
    static final Comparator<KeyEntry> BY_VERIFY_DEADLINE = order(e -> e.verifyUntil);
    static final Comparator<KeyEntry> BY_FENCE = order(e -> e.fenceUntil);

    final String key;
    /** The newest write not yet handed over: a newer write replaces it. */
    StatusUpdate unsent;
    /** In the request now on its way, or in one whose answer never came: it may be at the sidecar. */
    StatusUpdate sending;
    /** Accepted by the sidecar, outcome not yet known. */
    StatusUpdate pending;
    /** The sidecar says it wrote it; the worker's own store has not read it back yet. */
    StatusUpdate verifying;
    /**
     * Older writes of the key the sidecar took, replaced here by a newer one before their outcome came: the sidecar
     * writes them all the same (one in flight ahead of the newer), and their outcomes are counted (KIP-1278).
     */
    final List<Long> replaced = new ArrayList<>(1);
    /**
     * Since when (ms) the sidecar has held a write of this key without writing it: when it accepted the pending write,
     * or, for a write it gave back and took again, when it accepted the first of them (rule 5 counts from then).
     */
    long pendingSince;
    /** The pending time of a write the sidecar gave back (expired), for the write sent again; -1 when none. */
    long givenBackSince = -1;
    /** The sidecar instance that said it wrote the verifying write: the one rule 4 catches if it was not read back. */
    String verifyingBy;
    /** By when the verifying write must have been read back (ms). */
    long verifyUntil;
    /** Not sent before this time (ms): an old sidecar instance may still write this key until then. */
    long heldUntil;
    /** Whether the hold still applies (it is lifted once {@link #heldUntil} has passed). */
    boolean holding;
    /** The agent is leaving the sidecar: the key goes through Connect's path once past {@link #fenceUntil}. */
    boolean leaving;
    /** Leaving: not written through Connect before this time (ms). */
    long fenceUntil;
    /** Leaving: its fence has passed. */
    boolean pastFence;
    /** Connect's own path is being handed this key's newest write. */
    boolean draining;
    /**
     * The worker's store read a tombstone of this key (or of its connector) since the key's newest write was taken,
     * one the agent did not write: Connect abandons a retry of such a write (its cache entry is deleted), and so does
     * the agent, rather than write it through Connect after its fence, over the deletion.
     */
    boolean deleted;
    /** A tombstone of this key (DESTROYED) was taken while the entry lives: a tombstone read may be the agent's own. */
    boolean tookTombstone;

    KeyEntry(String key) {
        this.key = key;
    }

    StatusUpdate newest() {
        return unsent != null ? unsent : sending != null ? sending : pending != null ? pending : verifying;
    }

    boolean empty() {
        return unsent == null && sending == null && pending == null && verifying == null && !draining;
    }

    /** Whether a write of this key may be at the sidecar (on its way, pending, or said written and not yet seen). */
    boolean atSidecar() {
        return sending != null || pending != null || verifying != null;
    }

    /**
     * Whether an attempt of a write of this key may still be under way at the sidecar: one on its way to it, pending
     * there without an outcome, or replaced here by a newer one before its outcome came.
     */
    boolean mayBeInFlight() {
        return sending != null || pending != null || !replaced.isEmpty();
    }

    /** Whether an unconditional write of this key is unsettled (it may be written yet, or not). */
    boolean holdsUnconditional() {
        return (unsent != null && !unsent.safe) || (sending != null && !sending.safe)
                || (pending != null && !pending.safe) || (verifying != null && !verifying.safe);
    }

    @Override
    public String toString() {
        return key + "[unsent " + unsent + ", sending " + sending + ", pending " + pending + ", verifying " + verifying
                + "]";
    }

    /** Keys by a time, then by key: distinct entries never compare equal. */
    private static Comparator<KeyEntry> order(java.util.function.ToLongFunction<KeyEntry> time) {
        return Comparator.comparingLong(time).thenComparing(e -> e.key);
    }
}
