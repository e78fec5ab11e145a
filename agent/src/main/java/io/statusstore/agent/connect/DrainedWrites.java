package io.statusstore.agent.connect;

import io.statusstore.agent.status.StatusUpdate;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.RetriableException;

import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Consumer;

/**
 * The statuses the agent held (at the sidecar, past its fence) and then handed to the store's original method: until
 * each has landed, a newer write of its key is taken, or its key is deleted, the agent sees that a failed attempt is
 * tried again.
 *
 * <p>Connect abandons the retry of a failed status write once its store's generation moved: the generation of the
 * last status it was asked to write, of any key. A stock worker writes a status the moment it is asked to, at its own
 * generation; a status the agent held is written later, and by then the worker's generation may have moved (a
 * rebalance while the sidecar could not write): were its one attempt to fail (the broker just back, a leader moving),
 * Connect would abandon it and the key would keep its older status, where the stock worker's had landed. So when
 * Connect's callback did not queue a re-send of such a write, the agent writes it again through the store's original
 * method, on Connect's own retry thread behind Connect's own re-sends: Connect's rules judge it again as they judge
 * any write (a {@code putSafe} against what the store read since), and the store's generation is kept
 * ({@link StoreGeneration}).
 */
final class DrainedWrites {
    /** How long a new write of a key waits for the agent's re-send of its older status to reach the producer. */
    private static final long RESEND_WAIT_MS = 60_000;

    /** One held status's record handed to Connect's producer, and whether Connect queued its re-send itself. */
    private static final class Attempt {
        final StatusUpdate update;
        final String key;
        final Callback connects;
        /** The failed attempts so far: a check is about the failure it was queued for, not an earlier one. */
        int failures;
        /** Connect's retry thread sent the record again since its last failure (the callback came back). */
        boolean resent;

        Attempt(StatusUpdate update, String key, Callback connects) {
            this.update = update;
            this.key = key;
            this.connects = connects;
        }
    }

    private final ExecutorService retryExecutor;
    private final Map<String, Attempt> byKey = new HashMap<>();
    private final Map<Callback, Attempt> byCallback = new IdentityHashMap<>();
    /** Keys the agent writes again now: a newer write of such a key waits until that write reached the producer. */
    private final Set<String> resending = new HashSet<>();
    /** The store's original method, as the drain runs it (StoreOriginals.write). */
    private Consumer<StatusUpdate> original;

    DrainedWrites(ExecutorService retryExecutor) {
        this.retryExecutor = retryExecutor;
    }

    /** How the agent writes a status again: the store's original method, as the drain runs it. */
    synchronized void writeAgainWith(Consumer<StatusUpdate> originalMethod) {
        this.original = originalMethod;
    }

    /**
     * The drain hands Connect's producer the record of {@code update} with Connect's callback: the callback the
     * producer gets instead, which tells the agent its outcome once Connect's has run.
     */
    synchronized Callback sent(StatusUpdate update, String key, Callback connects) {
        if (update.kind == StatusUpdate.Kind.TOPIC || update.kind == StatusUpdate.Kind.DELETE_TOPIC
                || retryExecutor == null || original == null || connects == null) {
            return connects;
        }
        forget(byKey.get(key));
        Attempt attempt = new Attempt(update, key, connects);
        byKey.put(key, attempt);
        byCallback.put(connects, attempt);
        return watching(attempt);
    }

    /** A record sent again with {@code connects} (Connect's re-send, or the agent's): watched if a held status's. */
    synchronized Callback resent(Callback connects) {
        Attempt attempt = connects == null ? null : byCallback.get(connects);
        if (attempt == null) {
            return connects;
        }
        attempt.resent = true;
        return watching(attempt);
    }

    /** A newer write of {@code key} is taken: a held status of it is not sent again (once the agent's re-send is out). */
    synchronized void superseded(String key) {
        long deadline = System.nanoTime() / 1_000_000 + RESEND_WAIT_MS;
        while (resending.contains(key)) {
            long left = deadline - System.nanoTime() / 1_000_000;
            if (left <= 0) {
                break;
            }
            try {
                wait(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        forget(byKey.get(key));
    }

    /**
     * The store read a tombstone of {@code key} (a connector's deletes its tasks' too): as Connect abandons the retry
     * of a deleted key's status, so does the agent.
     */
    synchronized void deleted(String key, String connector) {
        forget(byKey.get(key));
        if (connector == null) {
            return;
        }
        for (Iterator<Attempt> it = byKey.values().iterator(); it.hasNext(); ) {
            Attempt attempt = it.next();
            if (connector.equals(attempt.update.connector)) {
                it.remove();
                byCallback.remove(attempt.connects);
            }
        }
    }

    /** Whether a held status of {@code key} is still watched (for tests). */
    synchronized boolean watched(String key) {
        return byKey.containsKey(key);
    }

    private Callback watching(Attempt attempt) {
        return (RecordMetadata metadata, Exception error) -> {
            try {
                attempt.connects.onCompletion(metadata, error);
            } finally {
                outcome(attempt, error);
            }
        };
    }

    /**
     * Connect's callback has run: landed, or failed for good, the write is settled; failed retriably, Connect has
     * already decided whether to send it again (its retry is queued on its retry thread, ahead of the agent's check).
     */
    private synchronized void outcome(Attempt attempt, Exception error) {
        if (byKey.get(attempt.key) != attempt) {
            return;
        }
        if (!(error instanceof RetriableException)) {
            forget(attempt);
            return;
        }
        attempt.resent = false;
        int failure = ++attempt.failures;
        try {
            retryExecutor.submit(() -> resendIfAbandoned(attempt, failure));
        } catch (RejectedExecutionException e) {
            // The store stopped: nothing is sent any more, as with Connect's own re-sends.
            forget(attempt);
        }
    }

    /**
     * On Connect's retry thread, after Connect's own re-send for failure number {@code failure} (if it queued one) has
     * gone: a later failure has a check of its own, queued after Connect's decision on it.
     */
    private void resendIfAbandoned(Attempt attempt, int failure) {
        synchronized (this) {
            if (attempt.resent || attempt.failures != failure || byKey.get(attempt.key) != attempt) {
                return;
            }
            // Its record goes again as a new attempt (watched from its send on), or not at all if Connect's rules
            // drop it now (a putSafe no longer safe).
            forget(attempt);
            resending.add(attempt.key);
        }
        try {
            original.accept(attempt.update);
        } finally {
            synchronized (this) {
                resending.remove(attempt.key);
                notifyAll();
            }
        }
    }

    private void forget(Attempt attempt) {
        if (attempt != null && byKey.get(attempt.key) == attempt) {
            byKey.remove(attempt.key);
            byCallback.remove(attempt.connects);
        }
    }
}
