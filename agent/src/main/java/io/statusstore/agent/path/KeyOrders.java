package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The {@link KeyTable}'s keys in the orders its steps look for them by, so that no step scans the table: each
 * ordering holds the keys its slot or state places there, and a change to a key's fields happens between
 * {@link #detach} and {@link #attach}, O(log n) each. Not thread-safe: the {@link Router} guards it.
 */
final class KeyOrders {
    /** Keys with an unsent write and none on its way, not held: by that write's seq, the next to send first. */
    final TreeMap<Long, KeyEntry> sendable = new TreeMap<>();
    /** Keys held for an old instance of the sidecar. */
    final TreeSet<KeyEntry> held = new TreeSet<>(KeyEntry.BY_HOLD);
    /** Keys with a pending write, the longest pending first (rule 5). */
    final TreeSet<KeyEntry> pending = new TreeSet<>(KeyEntry.BY_PENDING_SINCE);
    /** Keys with a write to be read back, the earliest deadline first (rule 4). */
    final TreeSet<KeyEntry> verifying = new TreeSet<>(KeyEntry.BY_VERIFY_DEADLINE);
    /** Leaving: keys waiting for their fence, the earliest first. */
    final TreeSet<KeyEntry> fenced = new TreeSet<>(KeyEntry.BY_FENCE);
    /** Leaving: keys past their fence, by their newest write's seq (the oldest goes through Connect first). */
    final TreeMap<Long, KeyEntry> drainable = new TreeMap<>();
    /** Every seq whose outcome the agent still waits for (unsent, sending, pending, replaced in flight), by seq. */
    final TreeMap<Long, KeyEntry> awaiting = new TreeMap<>();
    int unsentKeys;

    /** Takes the entry out of every ordering, before a change to the fields they order by. */
    void detach(KeyEntry entry) {
        if (entry.unsent != null) {
            sendable.remove(entry.unsent.seq);
            awaiting.remove(entry.unsent.seq);
            unsentKeys--;
        }
        if (entry.sending != null) {
            awaiting.remove(entry.sending.seq);
        }
        if (entry.pending != null) {
            pending.remove(entry);
            awaiting.remove(entry.pending.seq);
        }
        if (entry.verifying != null) {
            verifying.remove(entry);
        }
        if (entry.holding) {
            held.remove(entry);
        }
        StatusUpdate newest = entry.newest();
        if (entry.leaving && !entry.draining && newest != null) {
            if (entry.pastFence) {
                drainable.remove(newest.seq);
            } else {
                fenced.remove(entry);
            }
        }
    }
    /** Puts the entry back into the orderings its fields now place it in. */
    void attach(KeyEntry entry) {
        if (entry.unsent != null) {
            unsentKeys++;
            awaiting.put(entry.unsent.seq, entry);
            if (entry.sending == null && !entry.holding) {
                sendable.put(entry.unsent.seq, entry);
            }
        }
        if (entry.sending != null) {
            awaiting.put(entry.sending.seq, entry);
        }
        if (entry.pending != null) {
            awaiting.put(entry.pending.seq, entry);
            pending.add(entry);
        }
        if (entry.verifying != null) {
            verifying.add(entry);
        }
        if (entry.holding) {
            held.add(entry);
        }
        StatusUpdate newest = entry.newest();
        if (entry.leaving && !entry.draining && newest != null) {
            if (entry.pastFence) {
                drainable.put(newest.seq, entry);
            } else {
                fenced.add(entry);
            }
        }
    }
    void releaseHolds(long now) {
        while (!held.isEmpty() && held.first().heldUntil <= now) {
            KeyEntry entry = held.first();
            detach(entry);
            entry.holding = false;
            attach(entry);
        }
    }
    void passFences(long now) {
        while (!fenced.isEmpty() && fenced.first().fenceUntil <= now) {
            KeyEntry entry = fenced.first();
            detach(entry);
            entry.pastFence = true;
            attach(entry);
        }
    }
    /** The key's writes replaced in flight are awaited no more (a newer one of the key has its outcome, or is gone). */
    void forgetReplaced(KeyEntry entry) {
        for (Long seq : entry.replaced) {
            awaiting.remove(seq);
        }
        entry.replaced.clear();
    }
}
