package io.statusstore.agent.sidecar;

import java.util.Map;
import java.util.Objects;

/** What the sidecar's {@code GET /} says about itself: which cluster and status topic it serves, and who it is. */
public final class SidecarIdentity {
    /** The agent protocol this agent speaks (PROTOCOL.md). */
    public static final long PROTOCOL = 1;

    public final String kafkaClusterId;
    public final String statusTopic;
    public final String instance;
    public final long agentProtocol;
    /**
     * The longest a write the sidecar started may take to land (its producer's delivery timeout): the fence
     * waits it out too. A sidecar that does not say gets {@link #UNKNOWN_WRITE_BOUND_MS}.
     */
    public final long writeBoundMs;

    /** What a sidecar that names no write bound is taken to need (Kafka's default delivery.timeout.ms). */
    public static final long UNKNOWN_WRITE_BOUND_MS = 120_000;

    public SidecarIdentity(String kafkaClusterId, String statusTopic, String instance, long agentProtocol,
                           long writeBoundMs) {
        this.kafkaClusterId = kafkaClusterId;
        this.statusTopic = statusTopic;
        this.instance = instance;
        this.agentProtocol = agentProtocol;
        this.writeBoundMs = writeBoundMs;
    }

    static SidecarIdentity from(Object json) {
        if (!(json instanceof Map)) {
            throw new IllegalArgumentException("GET / did not answer a JSON object");
        }
        Map<?, ?> map = (Map<?, ?>) json;
        Object protocol = map.get("agent_protocol");
        Object bound = map.get("write_bound_ms");
        return new SidecarIdentity(text(map.get("kafka_cluster_id")), text(map.get("status_topic")),
                text(map.get("instance")), protocol instanceof Long ? (Long) protocol : 0,
                bound instanceof Long && (Long) bound >= 0 ? (Long) bound : UNKNOWN_WRITE_BOUND_MS);
    }

    /**
     * Why this sidecar must not be given the worker's statuses, or null when it serves the worker's Kafka
     * cluster and status topic with this agent's protocol.
     */
    public String mismatch(String workerClusterId, String workerStatusTopic) {
        if (agentProtocol != PROTOCOL) {
            return "speaks agent protocol " + (agentProtocol == 0 ? "none" : String.valueOf(agentProtocol))
                    + ", this agent speaks " + PROTOCOL;
        }
        if (kafkaClusterId == null) {
            return "does not know its Kafka cluster id yet";
        }
        if (!Objects.equals(kafkaClusterId, workerClusterId)) {
            return "serves Kafka cluster " + kafkaClusterId + ", the worker's cluster is " + workerClusterId;
        }
        if (!Objects.equals(statusTopic, workerStatusTopic)) {
            return "writes status topic '" + statusTopic + "', the worker's status.storage.topic is '"
                    + workerStatusTopic + "'";
        }
        if (instance == null) {
            return "does not name its instance";
        }
        return null;
    }

    private static String text(Object value) {
        return value instanceof String ? (String) value : null;
    }
}
