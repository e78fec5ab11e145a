package io.statusstore.agent.path;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The status topic as the tests see it: every write of either path, in the order it landed. */
public final class Topic {
    public Topic() {
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

    synchronized void append(String key, String marker, String via) {
        records.add(new Record(key, marker, via, FakeSidecar.now()));
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
