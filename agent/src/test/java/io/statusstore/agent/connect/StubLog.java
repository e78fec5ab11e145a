package io.statusstore.agent.connect;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.NotEnoughReplicasException;
import org.apache.kafka.common.errors.NotLeaderOrFollowerException;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.util.KafkaBasedLog;

import java.util.AbstractMap;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The status store's KafkaBasedLog without Kafka: what Connect's producer would be handed is recorded, and
 * answered at once (or, for {@link #failNext} sends, failed with a retriable error, as an outage does).
 * KafkaBasedLog.send itself, where the agent counts records, stays Connect's.
 */
final class StubLog extends KafkaBasedLog<String, byte[]> {
    /** One record Connect's producer would have sent: its key and value (null: a tombstone). */
    static final class Sent {
        final String key;
        final byte[] value;

        Sent(String key, byte[] value) {
            this.key = key;
            this.value = value;
        }
    }

    final List<Sent> sent = Collections.synchronizedList(new ArrayList<>());
    final AtomicInteger failNext = new AtomicInteger();
    /** This many sends from now on get no outcome until {@link #failHeld}: their records in flight in an outage. */
    final AtomicInteger holdNext = new AtomicInteger();
    /** The held sends: each record's key and its callback, in the order they were sent. */
    private final List<Map.Entry<String, Callback>> held = Collections.synchronizedList(new ArrayList<>());

    StubLog() {
        super("connect-status", Collections.emptyMap(), Collections.emptyMap(), () -> null, (e, r) -> { }, Time.SYSTEM,
                admin -> { });
    }

    @Override
    public void start() {
    }

    @Override
    public void stop() {
    }

    /** The status topic's partitions, Connect's default. */
    @Override
    public int partitionCount() {
        return 5;
    }

    @Override
    public Future<Void> readToEnd() {
        return CompletableFuture.completedFuture(null);
    }

    /** How many sends wait for their outcome. */
    int heldCount() {
        return held.size();
    }

    /**
     * The held sends fail, as a broker back from an outage answers a produce request meant for the partition's old
     * leader (a retriable error, as Connect's producer sees it when the broker returns).
     */
    void failHeld() {
        List<Map.Entry<String, Callback>> failing;
        synchronized (held) {
            failing = new ArrayList<>(held);
            held.clear();
        }
        for (Map.Entry<String, Callback> send : failing) {
            send.getValue().onCompletion(null, new NotLeaderOrFollowerException("stub: not the partition's leader"));
        }
    }

    /** The first held send of {@code key} fails as {@link #failHeld()} fails them all, on this thread. */
    void failHeld(String key) {
        Callback failing = null;
        synchronized (held) {
            for (Iterator<Map.Entry<String, Callback>> it = held.iterator(); it.hasNext() && failing == null; ) {
                Map.Entry<String, Callback> send = it.next();
                if (send.getKey().equals(key)) {
                    failing = send.getValue();
                    it.remove();
                }
            }
        }
        if (failing == null) {
            throw new IllegalStateException("no send of " + key + " is held");
        }
        failing.onCompletion(null, new NotLeaderOrFollowerException("stub: not the partition's leader"));
    }

    @Override
    public Future<RecordMetadata> sendWithReceipt(String key, byte[] value, Callback callback) {
        if (holdNext.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            held.add(new AbstractMap.SimpleImmutableEntry<>(key, callback));
            return new CompletableFuture<>();
        }
        if (failNext.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            callback.onCompletion(null, new NotEnoughReplicasException("stub outage"));
            return CompletableFuture.completedFuture(null);
        }
        sent.add(new Sent(key, value));
        RecordMetadata metadata = new RecordMetadata(new TopicPartition("connect-status", 0), 0, 0, 0, 0, 0);
        callback.onCompletion(metadata, null);
        return CompletableFuture.completedFuture(metadata);
    }
}
