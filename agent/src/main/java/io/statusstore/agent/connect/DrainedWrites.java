package io.statusstore.agent.connect;

import io.statusstore.agent.status.StatusUpdate;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.connect.util.KafkaBasedLog;

import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;

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
 * Connect's callback did not queue a re-send of such a write, the agent queues one, on Connect's own retry thread and
 * with Connect's own callback, behind Connect's own re-sends. A {@code putSafe}'s retry is left to Connect's rules
 * (they judge it against what the store read since).
 */
final class DrainedWrites {
    /** How long a new write of a key waits for the agent's re-send of its older status to reach the producer. */
    private static final long RESEND_WAIT_MS = 60_000;

    /** One held status's record handed to Connect's producer, and whether Connect queued its re-send itself. */
    private static final class Attempt {
        final String key;
        final String connector;
        final byte[] value;
        final Callback connects;
        /** Connect's retry thread sent the record again since its last failure (the callback came back). */
        boolean resent;
        /** The agent's re-send is on its way to the producer: a newer write of the key waits for it. */
        boolean sending;

        Attempt(String key, String connector, byte[] value, Callback connects) {
            this.key = key;
            this.connector = connector;
            this.value = value;
            this.connects = connects;
        }
    }

    private final KafkaBasedLog<String, byte[]> log;
    private final ExecutorService retryExecutor;
    private final Map<String, Attempt> byKey = new HashMap<>();
    private final Map<Callback, Attempt> byCallback = new IdentityHashMap<>();

    DrainedWrites(KafkaBasedLog<String, byte[]> log, ExecutorService retryExecutor) {
        this.log = log;
        this.retryExecutor = retryExecutor;
    }

    /**
     * The drain hands Connect's producer the record of {@code update} with Connect's callback: the callback the
     * producer gets instead, which tells the agent its outcome once Connect's has run.
     */
    synchronized Callback sent(StatusUpdate update, String key, byte[] value, Callback connects) {
        if (update.safe || update.kind == StatusUpdate.Kind.TOPIC || update.kind == StatusUpdate.Kind.DELETE_TOPIC
                || retryExecutor == null || connects == null) {
            return connects;
        }
        forget(byKey.get(key));
        Attempt attempt = new Attempt(key, update.connector, value, connects);
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
        Attempt attempt = byKey.get(key);
        long deadline = System.nanoTime() / 1_000_000 + RESEND_WAIT_MS;
        while (attempt != null && attempt.sending) {
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
            if (connector.equals(attempt.connector)) {
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
        try {
            retryExecutor.submit(() -> resendIfAbandoned(attempt));
        } catch (RejectedExecutionException e) {
            // The store stopped: nothing is sent any more, as with Connect's own re-sends.
            forget(attempt);
        }
    }

    /** On Connect's retry thread, after Connect's own re-send (if it queued one) has gone. */
    private void resendIfAbandoned(Attempt attempt) {
        synchronized (this) {
            if (attempt.resent || byKey.get(attempt.key) != attempt) {
                return;
            }
            attempt.sending = true;
        }
        try {
            log.send(attempt.key, attempt.value, attempt.connects);
        } finally {
            synchronized (this) {
                attempt.sending = false;
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
