package io.statusstore.agent.connect;

import org.apache.kafka.common.utils.Utils;

import java.nio.charset.StandardCharsets;

/**
 * The record the agent writes through the worker's own producer to learn whether it can write to a partition of
 * the status topic (rule 5): a tombstone of a topic status no one can hold, on that partition.
 *
 * <p>Its key is {@code status-topic-<topic>:connector-status-store-agent} with a topic name that has spaces, which
 * no Kafka topic can have: Connect's store reads it as the deletion of a topic status it never holds (nothing
 * changes, nothing is logged above TRACE), and so does the sidecar. The partition is the one Kafka's own default
 * partitioner gives the key (murmur2, from the worker's kafka-clients), as for every status record.
 */
final class ProbeRecord {
    private static final String PREFIX = "status-topic-status-store agent probe ";
    private static final String SUFFIX = ":connector-status-store-agent";

    private ProbeRecord() {
    }

    /** The partition of {@code key} among {@code partitions}, as the worker's producer places it. */
    static int partition(String key, int partitions) {
        return Utils.toPositive(Utils.murmur2(key.getBytes(StandardCharsets.UTF_8))) % partitions;
    }

    /** The probe key that lands on {@code partition} (of {@code partitions}). */
    static String keyFor(int partition, int partitions) {
        // murmur2 spreads the keys evenly: one in `partitions` fits, and a few hundred tries cover any topic.
        for (int i = 0; i < 1_000 * partitions; i++) {
            String key = PREFIX + i + SUFFIX;
            if (partition(key, partitions) == partition) {
                return key;
            }
        }
        throw new IllegalStateException("no probe key found for partition " + partition + " of " + partitions);
    }
}
