package statusstore.bench;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.AbstractStatus;
import org.apache.kafka.connect.runtime.TaskStatus;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;
import org.apache.kafka.connect.util.ConnectUtils;
import org.apache.kafka.connect.util.ConnectorTaskId;
import org.apache.kafka.connect.util.SharedTopicAdmin;

/**
 * Connect's own status backing store ({@code KafkaStatusBackingStore}), built as a distributed worker builds it
 * ({@code ConnectDistributed.createHerder}), driven from a line protocol on stdin for bench/connect_store.py.
 * Each command answers one line of JSON on stdout:
 *
 * <pre>
 *   write TOPIC N ack|visible   put N task statuses (bench.core's statuses(n)), then wait until every write is
 *                               acknowledged (flush()) or also read back into the store's cache (get() answers it):
 *                               {"seconds": s, "cpu_seconds": c}
 *   read TOPIC N                configure and start() a store on TOPIC (topic check, clients, read to the end),
 *                               which holds statuses(N): {"seconds": s, "cpu_seconds": c, "statuses": N}, once
 *                               every one of them is found in the store's cache
 *   fleet TOPIC N               the same on a topic of any N statuses (bench/fleet_scale.py's fleet), counted in the
 *                               store's cache (connectors(), get(), getAll()), and the heap the store holds: the
 *                               heap used after full collections once started, less before it was made, and the
 *                               process's resident set: {"seconds", "cpu_seconds", "statuses", "heap_bytes",
 *                               "rss_bytes"}
 *   quit
 * </pre>
 *
 * Every store is stopped before the answer. Times are wall-clock from the first put (or from configure) to the
 * mark; CPU is the whole process's (every thread: the caller, the producer's and the reader's, JIT and GC).
 */
public final class StatusStoreHarness {
    // How long to wait, at most, for one command's writes or read.
    private static final long BOUND_NS = TimeUnit.MINUTES.toNanos(10);

    private final String bootstrapServers;

    private StatusStoreHarness(String bootstrapServers) {
        this.bootstrapServers = bootstrapServers;
    }

    public static void main(String[] args) throws Exception {
        StatusStoreHarness harness = new StatusStoreHarness(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] command = line.trim().split(" ");
            switch (command[0]) {
                case "write":
                    harness.write(command[1], Integer.parseInt(command[2]), command[3].equals("visible"));
                    break;
                case "read":
                    harness.read(command[1], Integer.parseInt(command[2]));
                    break;
                case "fleet":
                    harness.fleet(command[1], Integer.parseInt(command[2]));
                    break;
                case "quit":
                    return;
                default:
                    throw new IllegalArgumentException("unknown command: " + line);
            }
        }
    }

    /** The statuses of bench.core's statuses(n), with Connect 4.x's version field (null: no plugin version). */
    static List<TaskStatus> statuses(int n) {
        List<TaskStatus> statuses = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            boolean failed = i % 50 == 0;
            String trace = failed
                    ? "org.apache.kafka.connect.errors.ConnectException: failure " + i + "\n\tat X.y(X.java:1)\n"
                    : null;
            statuses.add(new TaskStatus(new ConnectorTaskId("connector-" + (i % 2000), i / 2000),
                    failed ? AbstractStatus.State.FAILED : AbstractStatus.State.RUNNING,
                    "worker-" + (i % 10) + ".example.com:8083", i % 50, trace, null));
        }
        return statuses;
    }

    private void write(String topic, int n, boolean visible) throws Exception {
        List<TaskStatus> statuses = statuses(n);
        try (Store store = new Store(topic)) {
            store.start();
            long cpu = cpuNanos();
            long start = System.nanoTime();
            for (TaskStatus status : statuses) {
                store.backingStore.put(status);
            }
            if (visible) {
                for (TaskStatus status : statuses) {
                    while (!readBack(store.backingStore, status)) {
                        bounded(start, "statuses read back");
                        LockSupport.parkNanos(50_000);
                    }
                }
            } else {
                store.backingStore.flush();
            }
            answer(String.format(Locale.ROOT, "{\"seconds\": %.6f, \"cpu_seconds\": %.6f}",
                    (System.nanoTime() - start) / 1e9, (cpuNanos() - cpu) / 1e9));
        }
    }

    private void read(String topic, int expected) throws Exception {
        try (Started started = new Started(topic)) {
            int statuses = 0;
            for (TaskStatus status : statuses(expected)) {
                statuses += readBack(started.store.backingStore, status) ? 1 : 0;
            }
            answer(started.figures(expected, statuses) + "}");
        }
    }

    private void fleet(String topic, int expected) throws Exception {
        long heapBefore = heapAfterCollections();
        try (Started started = new Started(topic)) {
            KafkaStatusBackingStore store = started.store.backingStore;
            int statuses = 0;
            for (String connector : store.connectors()) {
                statuses += (store.get(connector) != null ? 1 : 0) + store.getAll(connector).size();
            }
            String figures = started.figures(expected, statuses);
            answer(String.format(Locale.ROOT, "%s, \"heap_bytes\": %d, \"rss_bytes\": %d}", figures,
                    heapAfterCollections() - heapBefore, residentBytes()));
        }
    }

    /** A store made and started on a topic, timed from before it was made (wall-clock and CPU nanoseconds). */
    private final class Started implements AutoCloseable {
        final Store store;
        final long nanos;
        final long cpuNanos;

        Started(String topic) {
            long cpu = cpuNanos();
            long start = System.nanoTime();
            store = new Store(topic);
            store.start();
            nanos = System.nanoTime() - start;
            cpuNanos = cpuNanos() - cpu;
        }

        /** The start's figures as JSON without its closing brace, once the store was found to hold them all. */
        String figures(int expected, int statuses) {
            if (statuses != expected) {
                throw new IllegalStateException("read " + statuses + " of the " + expected + " statuses written");
            }
            return String.format(Locale.ROOT, "{\"seconds\": %.6f, \"cpu_seconds\": %.6f, \"statuses\": %d",
                    nanos / 1e9, cpuNanos / 1e9, statuses);
        }

        @Override
        public void close() {
            store.close();
        }
    }

    /** The heap used after full collections (until it no longer shrinks, five at most). */
    private static long heapAfterCollections() {
        long used = Long.MAX_VALUE;
        for (int i = 0; i < 5; i++) {
            System.gc();
            long now = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
            if (now >= used) {
                return now;
            }
            used = now;
        }
        return used;
    }

    /** The process's resident set (VmRSS of /proc/self/status), in bytes. */
    private static long residentBytes() throws Exception {
        for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        return -1;
    }

    /** Whether the store's cache holds what was written for the status's task (Connect's visibility rule). */
    private static boolean readBack(KafkaStatusBackingStore store, TaskStatus written) {
        TaskStatus read = store.get(written.id());
        return read != null && read.state() == written.state() && read.generation() == written.generation()
                && read.workerId().equals(written.workerId());
    }

    private static void bounded(long start, String what) {
        if (System.nanoTime() - start > BOUND_NS) {
            throw new IllegalStateException(what + ": not within the bound");
        }
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private static void answer(String json) {
        System.out.println(json);
        System.out.flush();
    }

    /** A KafkaStatusBackingStore on one topic, made as ConnectDistributed makes the worker's. */
    private final class Store implements AutoCloseable {
        final KafkaStatusBackingStore backingStore;
        final SharedTopicAdmin admin;
        boolean started;

        Store(String topic) {
            Map<String, String> settings = new HashMap<>();
            settings.put("bootstrap.servers", bootstrapServers);
            settings.put("group.id", "harness-" + topic);
            settings.put("config.storage.topic", topic + "-configs");
            settings.put("offset.storage.topic", topic + "-offsets");
            settings.put("status.storage.topic", topic);
            settings.put("status.storage.replication.factor", "1");
            settings.put("key.converter", JsonConverter.class.getName());
            settings.put("value.converter", JsonConverter.class.getName());
            DistributedConfig config = new DistributedConfig(settings);
            String clientIdBase = ConnectUtils.clientIdBase(config);
            Map<String, Object> adminSettings = new HashMap<>(config.originals());
            adminSettings.put("client.id", clientIdBase + "shared-admin");
            admin = new SharedTopicAdmin(adminSettings);
            // The worker's internal value converter (Worker: schemaless JSON).
            JsonConverter converter = new JsonConverter();
            converter.configure(Map.of("schemas.enable", "false"), false);
            backingStore = new KafkaStatusBackingStore(Time.SYSTEM, converter, admin, clientIdBase);
            backingStore.configure(config);
        }

        void start() {
            backingStore.start();
            started = true;
        }

        @Override
        public void close() {
            if (started) {
                backingStore.stop();
            }
            admin.close();
        }
    }
}
