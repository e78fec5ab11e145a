package io.statusstore.agent.path;

import io.statusstore.agent.json.JsonOut;
import io.statusstore.agent.json.JsonTree;
import io.statusstore.agent.status.StatusUpdate;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * The status topic as the tests see it: every write of either path, in the order it landed, each also handed to
 * its {@link #reader} as Connect's store would read it (key and value bytes, null for a tombstone).
 */
public final class Topic {
    private volatile BiConsumer<String, byte[]> reader = (key, value) -> { };

    public Topic() {
    }

    /** Who reads every record as it lands (the worker's store, feeding the agent's {@link ReadBack}). */
    public void reader(BiConsumer<String, byte[]> read) {
        reader = read;
    }

    /** One landed write: its key, its marker (the test puts "v<n>" in the trace), which path, when. */
    public static final class Record {
        public final String key;
        public final String marker;
        public final String via;
        final long at;

        Record(String key, String marker, String via, long at) {
            this.key = key;
            this.marker = marker;
            this.via = via;
            this.at = at;
        }

        @Override
        public String toString() {
            return key + "=" + marker + " via " + via;
        }
    }

    private final List<Record> records = new ArrayList<>();

    /** A write lands: its key, its marker, which path, and its value bytes as Connect would read them. */
    void append(String key, String marker, String via, byte[] value) {
        synchronized (this) {
            records.add(new Record(key, marker, via, FakeSidecar.now()));
        }
        reader.accept(key, value);
    }

    /** The record value Connect writes for a status (null: a tombstone), with the test's marker as its trace. */
    static byte[] value(StatusUpdate u) {
        return value(u.kind.wire, u.state, u.trace, u.workerId, u.generation, u.topic, u.connector, u.task,
                u.discoverTimestamp);
    }

    static byte[] value(String kind, String state, String trace, String workerId, long generation, String topic,
                        String connector, long task, long discoverTimestamp) {
        if (kind.equals("delete_topic") || "DESTROYED".equals(state)) {
            return null;
        }
        JsonOut w = new JsonOut().beginObject();
        if (kind.equals("topic")) {
            w.name("topic").beginObject().name("name").value(topic).name("connector").value(connector)
                    .name("task").value(task).name("discoverTimestamp").value(discoverTimestamp).endObject();
        } else {
            w.name("state").value(state).name("trace").value(trace).name("worker_id").value(workerId)
                    .name("generation").value(generation);
        }
        return w.endObject().toString().getBytes(StandardCharsets.UTF_8);
    }

    /** The test's marker of a status record value: its trace. */
    static String marker(byte[] value) {
        Object json = JsonTree.parse(value);
        return (String) ((Map<?, ?>) json).get("trace");
    }

    public synchronized List<Record> records() {
        return new ArrayList<>(records);
    }

    /** The value each key ends with, as a compacted topic keeps it. */
    synchronized Map<String, String> latest() {
        Map<String, String> latest = new LinkedHashMap<>();
        for (Record r : records) {
            latest.put(r.key, r.marker);
        }
        return latest;
    }

    synchronized List<Record> via(String via) {
        List<Record> out = new ArrayList<>();
        for (Record r : records) {
            if (r.via.equals(via)) {
                out.add(r);
            }
        }
        return out;
    }
}
