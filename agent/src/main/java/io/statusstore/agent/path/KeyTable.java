package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The agent's table of statuses not yet settled, bounded by keys, not by writes.
 *
 * <p>Each key ({@link KeyEntry}) has up to four slots: {@code unsent} (the newest write not yet handed over: a newer
 * write replaces it), {@code sending} (in the request now on its way, or in one whose answer never came: it may be
 * at the sidecar), {@code pending} (accepted by the sidecar, outcome not yet known) and {@code verifying} (the sidecar
 * says it wrote it; the worker's own store has not read it back yet). A key leaves the table when all four are
 * empty. Leaving the sidecar, each key gets its fence: the time after which nothing the sidecar took of it can land
 * (at once for a key with nothing there); past it, Connect's own path writes the key's newest.
 *
 * <p>Worker threads offer writes under the lock the sender takes for each of its steps, so no step may cost more
 * than a few operations per key it touches: the keys are kept ordered by what each step looks for (the next to send
 * by seq, the oldest pending, the next read-back deadline, the next fence, the next to drain), and a change to a key
 * moves it between those orders ({@link KeyOrders}), O(log n) each. Only the rare whole-table moves ({@link KeyMoves})
 * (leaving the sidecar, its restart) visit every key, once. Not thread-safe: the {@link Router} guards it.
 */
final class KeyTable {
    private static final Comparator<StatusUpdate> BY_SEQ = Comparator.comparingLong(u -> u.seq);
    private static final String CONNECTOR_PREFIX = "status-connector-";

    private final Map<String, KeyEntry> entries = new HashMap<>();
    private final KeyOrders orders = new KeyOrders();
    private final KeyMoves moves = new KeyMoves(entries, orders);
    private final int maxKeys;

    KeyTable(int maxKeys) {
        this.maxKeys = maxKeys;
    }

    /** The whole-table moves: leaving the sidecar (fences, the drain to Connect's path), its restart (holds). */
    KeyMoves moves() {
        return moves;
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
        KeyEntry entry = entries.get(update.key);
        if (entry == null) {
            if (!newKeys || entries.size() >= maxKeys) {
                return false;
            }
            entry = new KeyEntry(update.key);
            entries.put(update.key, entry);
        }
        orders.detach(entry);
        entry.unsent = update.safe && entry.holdsUnconditional() ? update.unconditional() : update;
        // A write taken after a tombstone was read is a new status of the key, as in Connect's new cache entry.
        entry.deleted = false;
        entry.tookTombstone |= tombstone(update);
        orders.attach(entry);
        return true;
    }

    /**
     * The worker's store read a tombstone of {@code key}: the writes of that key, and for a connector's key those of
     * its tasks, taken before it are deleted (Connect deletes the cache entries of the connector and its tasks), unless
     * the agent took a tombstone of the key itself. Visits every key for a connector's tombstone (a deletion is rare).
     */
    void tombstoneRead(String key) {
        markDeleted(entries.get(key));
        if (key.startsWith(CONNECTOR_PREFIX)) {
            String connector = key.substring(CONNECTOR_PREFIX.length());
            for (KeyEntry entry : entries.values()) {
                StatusUpdate newest = entry.newest();
                if (newest != null && newest.kind == StatusUpdate.Kind.TASK && newest.connector.equals(connector)) {
                    markDeleted(entry);
                }
            }
        }
    }

    /** Whether the agent took a tombstone of {@code key} itself while it was in the table (a tombstone read may be its own). */
    boolean tookTombstone(String key) {
        KeyEntry entry = entries.get(key);
        return entry != null && entry.tookTombstone;
    }

    private static void markDeleted(KeyEntry entry) {
        if (entry != null && !entry.tookTombstone) {
            entry.deleted = true;
        }
    }

    /** Whether the write is a tombstone of a connector's or a task's status, as Connect writes DESTROYED. */
    static boolean tombstone(StatusUpdate update) {
        return update.kind != StatusUpdate.Kind.TOPIC && update.kind != StatusUpdate.Kind.DELETE_TOPIC
                && "DESTROYED".equals(update.state);
    }

    /**
     * Moves up to {@code max} unsent writes, oldest first, to their sending slot and returns them; keys held
     * (see {@link #resendPending}) until after {@code now} wait, and so do keys whose last request went unanswered.
     */
    List<StatusUpdate> takeBatch(int max, long now) {
        orders.releaseHolds(now);
        if (orders.sendable.isEmpty()) {
            return Collections.emptyList();
        }
        List<StatusUpdate> batch = new ArrayList<>(Math.min(max, orders.sendable.size()));
        while (batch.size() < max && !orders.sendable.isEmpty()) {
            KeyEntry entry = orders.sendable.firstEntry().getValue();
            orders.detach(entry);
            entry.sending = entry.unsent;
            entry.unsent = null;
            orders.attach(entry);
            batch.add(entry.sending);
        }
        return batch;
    }

    /**
     * The sidecar took a sent write and will report its outcome. An older pending write of its key stays awaited as
     * replaced: the sidecar writes it too, and says so.
     */
    void accepted(StatusUpdate update, long now) {
        KeyEntry entry = entries.get(update.key);
        if (entry != null && sending(entry, update)) {
            orders.detach(entry);
            if (entry.pending != null) {
                entry.replaced.add(entry.pending.seq);
                orders.awaiting.put(entry.pending.seq, entry);
            }
            entry.sending = null;
            entry.pending = update;
            // A write given back and taken again has been held since the first was taken: sent again and again (a
            // sidecar that cannot reach Kafka), it must not put rule 5's question off for ever.
            entry.pendingSince = entry.givenBackSince >= 0 ? entry.givenBackSince : now;
            entry.givenBackSince = -1;
            orders.attach(entry);
        }
    }

    /** The sidecar settled a sent write at once (dropped, refused, or an outcome it had already). */
    void settledOnArrival(StatusUpdate update) {
        KeyEntry entry = entries.get(update.key);
        if (entry != null && sending(entry, update)) {
            orders.detach(entry);
            entry.sending = null;
            orders.attach(entry);
            removeIfEmpty(entry);
        }
    }

    /** A sent write the sidecar surely did not take: it is unsent again, unless a newer write of its key is. */
    void returned(StatusUpdate update) {
        KeyEntry entry = entries.get(update.key);
        if (entry != null && sending(entry, update)) {
            orders.detach(entry);
            entry.sending = null;
            if (entry.unsent == null) {
                entry.unsent = update;
            }
            orders.attach(entry);
        }
    }

    /**
     * The sidecar will not write this write (any more): it is the agent's again, unsent as {@code again} (the same
     * write under a new seq), unless a newer write of its key is unsent or on its way. Returns whether it was in
     * a slot (sending or pending) to take back.
     */
    boolean takeBack(StatusUpdate update, StatusUpdate again) {
        KeyEntry entry = entries.get(update.key);
        if (entry == null || !(sending(entry, update) || (entry.pending != null && entry.pending.seq == update.seq))) {
            return false;
        }
        orders.detach(entry);
        if (sending(entry, update)) {
            entry.sending = null;
        } else {
            entry.pending = null;
            entry.givenBackSince = entry.givenBackSince >= 0 ? Math.min(entry.givenBackSince, entry.pendingSince)
                    : entry.pendingSince;
        }
        if (entry.unsent == null && entry.sending == null) {
            entry.unsent = again;
        }
        orders.attach(entry);
        return true;
    }

    /** The pending write {@code seq} of {@code key}, or null. */
    StatusUpdate pending(String key, long seq) {
        KeyEntry entry = entries.get(key);
        return entry != null && entry.pending != null && entry.pending.seq == seq ? entry.pending : null;
    }

    /** Whether the agent still waits for the outcome of {@code seq} (it is counted when it comes). */
    boolean awaits(long seq) {
        return orders.awaiting.containsKey(seq);
    }

    /** The outcome of {@code seq} came: if it was a write replaced in flight, it is awaited no more. */
    void outcomeCame(long seq) {
        KeyEntry entry = orders.awaiting.get(seq);
        if (entry != null && entry.replaced.remove(Long.valueOf(seq))) {
            orders.awaiting.remove(seq);
        }
    }

    /** An outcome settles the pending write it names; returns whether it did (an older write's is ignored). */
    boolean settle(String key, long seq) {
        KeyEntry entry = entries.get(key);
        if (entry == null || entry.pending == null || entry.pending.seq != seq) {
            return false;
        }
        orders.detach(entry);
        entry.pending = null;
        orders.forgetReplaced(entry);
        orders.attach(entry);
        removeIfEmpty(entry);
        return true;
    }

    /**
     * The sidecar says it wrote the pending (or, sent again, the sending) write {@code seq} of {@code key}: it is
     * checked against what the worker's store reads back until {@code until}, and settled at once if the store has
     * read it already; {@code by} is the instance that says so (null: not known). Returns whether it named one.
     */
    boolean written(String key, long seq, long until, ReadBack readBack, String by) {
        KeyEntry entry = entries.get(key);
        if (entry == null) {
            return false;
        }
        StatusUpdate written;
        if (entry.pending != null && entry.pending.seq == seq) {
            written = entry.pending;
        } else if (entry.sending != null && entry.sending.seq == seq) {
            written = entry.sending;
        } else {
            return false;
        }
        orders.detach(entry);
        if (written == entry.pending) {
            entry.pending = null;
            // The sidecar writes a key's writes in order: those it took before this one have their outcome too.
            orders.forgetReplaced(entry);
        } else {
            entry.sending = null;
        }
        if (entry.verifying == null || entry.verifying.seq < written.seq) {
            entry.verifying = readBack.seen(written) ? null : written;
            entry.verifyingBy = by;
            entry.verifyUntil = until;
        }
        orders.attach(entry);
        removeIfEmpty(entry);
        return true;
    }

    /** The worker's store read {@code key}: its write said written is settled if that is what it read. */
    void readBack(String key, ReadBack readBack) {
        KeyEntry entry = entries.get(key);
        if (entry != null && entry.verifying != null && readBack.seen(entry.verifying)) {
            orders.detach(entry);
            entry.verifying = null;
            orders.attach(entry);
            removeIfEmpty(entry);
        }
    }

    /**
     * A write said written whose time to be read back has passed without it (the sidecar said it wrote what it did
     * not), or null; those read back by now are settled on the way.
     */
    StatusUpdate unseen(ReadBack readBack, long now) {
        while (!orders.verifying.isEmpty() && orders.verifying.first().verifyUntil < now) {
            KeyEntry entry = orders.verifying.first();
            if (!readBack.seen(entry.verifying)) {
                return entry.verifying;
            }
            readBack(entry.key, readBack);
        }
        return null;
    }

    /** The sidecar instance that said it wrote {@code update}, the write of its key being read back, or null. */
    String saidWrittenBy(StatusUpdate update) {
        KeyEntry entry = entries.get(update.key);
        return entry != null && entry.verifying == update ? entry.verifyingBy : null;
    }

    /** The earliest time a write the sidecar says it wrote must have been read back, or -1. */
    long nextVerifyDeadline() {
        return orders.verifying.isEmpty() ? -1 : orders.verifying.first().verifyUntil;
    }

    /** The keys with a write whose outcome the agent still waits for (unsent, sending, pending, replaced in flight). */
    Set<String> awaitedKeys() {
        Set<String> keys = new HashSet<>();
        for (KeyEntry entry : orders.awaiting.values()) {
            keys.add(entry.key);
        }
        return keys;
    }

    /** Whether {@code key} has a write whose outcome the agent still waits for, or one being handed to Connect's path. */
    boolean awaitsWrite(String key) {
        KeyEntry entry = entries.get(key);
        return entry != null && (entry.unsent != null || entry.sending != null || entry.pending != null
                || !entry.replaced.isEmpty() || entry.draining);
    }

    /** The lowest number of any write whose outcome the agent still waits for, or -1 when there is none. */
    long lowestUnsettledSeq() {
        return orders.awaiting.isEmpty() ? -1 : orders.awaiting.firstKey();
    }

    boolean hasUnsent() {
        return orders.unsentKeys > 0;
    }

    boolean hasPending() {
        return !orders.pending.isEmpty();
    }

    /** When the longest pending write was accepted, or -1 when none is pending. */
    long oldestPendingSince() {
        return orders.pending.isEmpty() ? -1 : orders.pending.first().pendingSince;
    }

    /**
     * The sidecar says the last attempt of these pending writes waited out its write bound without Kafka's answer:
     * rule 5 counts each as pending since {@code since} at the latest (the sender passes now less the outcome bound,
     * so that they are overdue at once). A seq that is not pending here (settled since, or never sent) changes nothing.
     */
    void timedOut(List<Long> seqs, long since) {
        for (Long seq : seqs) {
            KeyEntry entry = orders.awaiting.get(seq);
            if (entry == null || entry.pending == null || entry.pending.seq != seq || entry.pendingSince <= since) {
                continue;
            }
            orders.detach(entry);
            entry.pendingSince = since;
            orders.attach(entry);
        }
    }

    /** The pending writes accepted at or before {@code since}, oldest first. */
    List<StatusUpdate> pendingSince(long since) {
        if (orders.pending.isEmpty() || orders.pending.first().pendingSince > since) {
            return Collections.emptyList();
        }
        List<StatusUpdate> old = new ArrayList<>();
        for (KeyEntry entry : orders.pending) {
            if (entry.pendingSince > since) {
                break;
            }
            old.add(entry.pending);
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

    /** Whether {@code update} is the write of the entry on its way (by seq: each write has its own). */
    private static boolean sending(KeyEntry entry, StatusUpdate update) {
        return entry.sending != null && entry.sending.seq == update.seq;
    }

    private void removeIfEmpty(KeyEntry entry) {
        if (entry.empty()) {
            orders.forgetReplaced(entry);
            entries.remove(entry.key);
        }
    }
}
