package io.statusstore.agent.status;

/**
 * One status write the worker made, as the agent hands it over: a connector or task status, a topic status,
 * or the deletion of a topic status, with its record key in Connect's format (status-connector-<name>, status-task-<name>-<n>,
 * status-topic-<topic>:connector-<name>).
 *
 * <p>{@code source} is the worker's own object, kept so the agent can give the write back to Connect's own
 * methods when it falls back. {@code seq} is the agent's counter, set when the write enters the agent's table.
 */
public final class StatusUpdate {
    /** The kinds the protocol knows, with their wire names. */
    public enum Kind {
        CONNECTOR("connector"), TASK("task"), TOPIC("topic"), DELETE_TOPIC("delete_topic");

        public final String wire;

        Kind(String wire) {
            this.wire = wire;
        }
    }

    public final long seq;
    public final Kind kind;
    public final String connector;
    /** The task number (task and topic statuses), else -1. */
    public final int task;
    /** The topic (topic statuses and deletions), else null. */
    public final String topic;
    public final String state;
    public final String trace;
    public final String workerId;
    public final int generation;
    /** Whether the worker's statuses carry KIP-891's version (Connect 4.1+); when false the field is absent. */
    public final boolean hasVersion;
    public final String version;
    public final long discoverTimestamp;
    /** putSafe: written unless the key holds another worker's status of a newer generation (Connect's safe write). */
    public final boolean safe;
    public final Object source;
    public final String key;

    private StatusUpdate(long seq, Kind kind, String connector, int task, String topic, String state, String trace,
                         String workerId, int generation, boolean hasVersion, String version, long discoverTimestamp,
                         boolean safe, Object source) {
        this.seq = seq;
        this.kind = kind;
        this.connector = connector;
        this.task = task;
        this.topic = topic;
        this.state = state;
        this.trace = trace;
        this.workerId = workerId;
        this.generation = generation;
        this.hasVersion = hasVersion;
        this.version = version;
        this.discoverTimestamp = discoverTimestamp;
        this.safe = safe;
        this.source = source;
        this.key = keyOf(kind, connector, task, topic);
    }

    public static StatusUpdate connector(String connector, String state, String trace, String workerId,
                                         int generation, boolean hasVersion, String version, boolean safe,
                                         Object source) {
        return new StatusUpdate(0, Kind.CONNECTOR, connector, -1, null, state, trace, workerId, generation,
                hasVersion, version, 0, safe, source);
    }

    public static StatusUpdate task(String connector, int task, String state, String trace, String workerId,
                                    int generation, boolean hasVersion, String version, boolean safe, Object source) {
        return new StatusUpdate(0, Kind.TASK, connector, task, null, state, trace, workerId, generation,
                hasVersion, version, 0, safe, source);
    }

    public static StatusUpdate topic(String connector, String topic, int task, long discoverTimestamp, Object source) {
        return new StatusUpdate(0, Kind.TOPIC, connector, task, topic, null, null, null, 0, false, null,
                discoverTimestamp, false, source);
    }

    public static StatusUpdate deleteTopic(String connector, String topic) {
        return new StatusUpdate(0, Kind.DELETE_TOPIC, connector, -1, topic, null, null, null, 0, false, null, 0,
                false, null);
    }

    /** This write numbered by the agent's counter. */
    public StatusUpdate withSeq(long newSeq) {
        return new StatusUpdate(newSeq, kind, connector, task, topic, state, trace, workerId, generation, hasVersion,
                version, discoverTimestamp, safe, source);
    }

    /** This write made unconditional (put instead of putSafe), keeping its number. */
    public StatusUpdate unconditional() {
        return !safe ? this : new StatusUpdate(seq, kind, connector, task, topic, state, trace, workerId, generation,
                hasVersion, version, discoverTimestamp, false, source);
    }

    @Override
    public String toString() {
        return "#" + seq + " " + key + (state != null ? " " + state : "") + (safe ? " (safe)" : "");
    }

    private static String keyOf(Kind kind, String connector, int task, String topic) {
        switch (kind) {
            case CONNECTOR: return "status-connector-" + connector;
            case TASK: return "status-task-" + connector + "-" + task;
            default: return "status-topic-" + topic + ":connector-" + connector;
        }
    }
}
