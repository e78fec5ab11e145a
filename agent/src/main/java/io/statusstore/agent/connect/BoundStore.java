package io.statusstore.agent.connect;

import io.statusstore.agent.AgentLog;
import io.statusstore.agent.AgentOptions;
import io.statusstore.agent.Daemons;
import io.statusstore.agent.Warnings;
import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.jmx.MetricsMBeans;
import io.statusstore.agent.path.ReadBack;
import io.statusstore.agent.path.Router;
import io.statusstore.agent.path.Sender;
import io.statusstore.agent.sidecar.SidecarClient;
import io.statusstore.agent.sidecar.Token;
import io.statusstore.agent.status.StatusUpdate;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.storage.StatusBackingStore;
import org.apache.kafka.connect.util.KafkaBasedLog;

import java.io.InputStream;
import java.lang.reflect.Field;
import java.util.Properties;
import java.util.concurrent.ExecutorService;

/**
 * The worker's status store as the agent serves it: learnt from {@code configure(WorkerConfig)} (its status
 * topic, its Kafka cluster id, which configure itself looked up and WorkerConfig keeps), with its router,
 * sender thread and MBeans.
 */
final class BoundStore {
    /** How long what the worker's store reads of a key is kept after the agent's write of it went out (rule 4). */
    private static final long READ_BACK_KEEP_MS = 600_000;

    final Object store;
    final Object kafkaLog;
    final SendCount sends = new SendCount();
    final AgentMetrics metrics = new AgentMetrics();
    final ReadBack readBack;
    final DrainedWrites drained;
    private final AgentOptions options;
    private final Warnings warnings;
    private final Router router;
    private final Sender sender;
    private Thread thread;

    private BoundStore(Object store, Object kafkaLog, ExecutorService retryExecutor, AgentOptions options,
                       Warnings warnings, String clusterId, String statusTopic) {
        this.store = store;
        this.kafkaLog = kafkaLog;
        this.options = options;
        this.warnings = warnings;
        this.readBack = new ReadBack(2 * options.maxKeys, READ_BACK_KEEP_MS);
        this.router = new Router(options.maxKeys, metrics, readBack);
        @SuppressWarnings("unchecked")
        KafkaBasedLog<String, byte[]> log = (KafkaBasedLog<String, byte[]>) kafkaLog;
        this.drained = new DrainedWrites(retryExecutor);
        StoreOriginals originals = new StoreOriginals((StatusBackingStore) store, log, sends, retryExecutor,
                metrics);
        drained.writeAgainWith(originals::write);
        router.undoWith(originals);
        SidecarClient client = new SidecarClient(options.url, Token.from(options.tokenFile, options.token),
                options.connectTimeoutMs, options.readTimeoutMs, options.tls);
        this.sender = new Sender(options, router, client, originals, metrics, warnings, clusterId, statusTopic);
    }

    /** {@code warnings}: the agent's in this JVM, which the store's warnings go through too. */
    static BoundStore bind(Object store, WorkerConfig config, AgentOptions options, Warnings warnings)
            throws ReflectiveOperationException {
        String statusTopic = config.getString("status.storage.topic");
        String clusterId = config.kafkaClusterId();
        BoundStore b = new BoundStore(store, field(store, "kafkaLog"), (ExecutorService) field(store, "sendRetryExecutor"),
                options, warnings, clusterId, statusTopic);
        Object clientId = field(store, "clientId");
        String id = clientId instanceof String ? (String) clientId : "connect-statuses";
        try {
            MetricsMBeans.register(b.metrics, id);
        } catch (Exception e) {
            AgentLog.warn("could not register the agent's MBeans (" + e + "); the agent goes on without them");
        }
        AgentLog.info("serving the worker's status store: status topic '" + statusTopic + "', Kafka cluster "
                + clusterId + ", Kafka " + kafkaVersion() + " (statuses "
                + (StatusReader.hasVersion() ? "carry" : "carry no") + " version), MBeans client-id=" + id
                + "; sidecar " + options.url);
        return b;
    }

    boolean offer(StatusUpdate update) {
        return router.offer(update);
    }

    synchronized void start() {
        if (thread == null) {
            thread = Daemons.named("status-store-agent-sender").newThread(sender);
            thread.start();
        }
    }

    /** Before Connect's stop: bounded, hands everything unsettled to the sidecar or to Connect's own path. */
    void stop() throws InterruptedException {
        router.requestStop();
        synchronized (this) {
            if (thread == null) {
                router.finish();
                return;
            }
        }
        // stop() waits at most max(stop.timeout.ms, connect.timeout.ms + read.timeout.ms, the fence) + 1 s: the final
        // request (or the failure that leaves the sidecar), the fence of what the sidecar holds (last request sent +
        // lease.ms + the sidecar's write bound + 1 s), then the margin for handing the keys to Connect's producer
        // (a send() that only queues the record: Connect's own stop then flushes it).
        long request = Math.max(options.stopTimeoutMs, (long) options.connectTimeoutMs + options.readTimeoutMs);
        long started = System.nanoTime();
        int left = router.awaitStopped(request, Sender.FENCE_MARGIN_MS);
        if (left > 0) {
            AgentLog.warn("the status store stops with " + left + " key(s) not yet handed to Connect's own path after "
                    + (System.nanoTime() - started) / 1_000_000 + " ms; the agent goes on handing them until Connect's "
                    + "producer closes");
        }
    }

    /** Before Connect's flush: bounded, waits for what the sidecar was given to be settled. */
    void flush() throws InterruptedException {
        Router.Path path = router.path();
        if (path != Router.Path.CONNECT && path != Router.Path.STOPPED && !router.awaitSettled(options.flushTimeoutMs)) {
            // Every rebalance flushes: a short flush.timeout.ms through a long outage is a line a minute, counted.
            warnings.warn("flush", "flush: " + router.size() + " key(s) not settled after " + options.flushTimeoutMs
                    + " ms (flush.timeout.ms); the rebalance goes on");
        }
    }

    boolean stopped() {
        return router.path() == Router.Path.STOPPED;
    }

    Router router() {
        return router;
    }

    /** The worker's Kafka version, as kafka-clients records it (the same resource in 3.9 and 4.x). */
    private static String kafkaVersion() {
        try (InputStream in = WorkerConfig.class.getClassLoader().getResourceAsStream("kafka/kafka-version.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (Exception e) {
            return "unknown";
        }
    }

    private static Object field(Object target, String name) throws ReflectiveOperationException {
        for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(target);
            } catch (NoSuchFieldException e) {
                // look in the superclass
            }
        }
        throw new NoSuchFieldException(name);
    }
}
