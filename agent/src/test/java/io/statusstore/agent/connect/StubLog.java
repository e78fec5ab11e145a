package io.statusstore.agent.connect;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.NotEnoughReplicasException;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.util.KafkaBasedLog;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
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

    @Override
    public Future<RecordMetadata> sendWithReceipt(String key, byte[] value, Callback callback) {
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
