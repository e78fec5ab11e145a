package io.statusstore.agent.connect;

import io.statusstore.agent.AgentOptions;
import io.statusstore.agent.Warnings;
import io.statusstore.agent.path.FakeSidecar;
import io.statusstore.agent.path.Router;
import io.statusstore.agent.path.Topic;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;

import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * What the tests of this package build Connect's real KafkaStatusBackingStore with (4.4.0's, loaded in this JVM and
 * instrumented by the agent's advice): a worker's configuration, a store bound by the agent to a FakeSidecar with a
 * {@link StubLog} for its KafkaBasedLog, and the waits and reads the tests make of them.
 */
final class StoreFixture {
    private StoreFixture() {
    }

    /** A sidecar that takes writes and holds them pending (no outcome until it stops). */
    static FakeSidecar holdingSidecar() throws Exception {
        FakeSidecar sidecar = new FakeSidecar(new Topic());
        sidecar.writeAtOnce = false;
        return sidecar.start();
    }

    /** A case run against {@link #withHeldStore}'s sidecar, store and stub log. */
    interface HeldStoreCase {
        void run(FakeSidecar sidecar, StubLog log, KafkaStatusBackingStore store, BoundStore bound) throws Exception;
    }

    /**
     * Runs {@code test} against a holding sidecar and a store of this JVM bound to it ({@link #armedStore}), its log
     * the stub; then stops the sidecar and disarms the agent, whatever the case did.
     */
    static void withHeldStore(HeldStoreCase test) throws Exception {
        FakeSidecar sidecar = holdingSidecar();
        try {
            StubLog log = new StubLog();
            KafkaStatusBackingStore store = armedStore(sidecar, log);
            test.run(sidecar, log, store, StoreHooks.bound());
        } finally {
            sidecar.stop();
            StoreHooks.disarm();
        }
    }

    /** Connect's own path of {@code store} (its producer the stub log, its retry executor), to ask whether it is quiet. */
    static StoreOriginals connectPath(KafkaStatusBackingStore store, StubLog log, BoundStore bound) throws Exception {
        return new StoreOriginals(store, log, bound.sends, (ExecutorService) readField(store, "sendRetryExecutor"),
                bound.metrics);
    }

    /** Connect's JSON converter for the status topic, as a worker configures it. */
    static JsonConverter jsonConverter() {
        JsonConverter converter = new JsonConverter();
        converter.configure(Collections.singletonMap("schemas.enable", "false"), false);
        return converter;
    }

    /** A store of this JVM bound by the agent to {@code sidecar}, its log the stub, on the sidecar's path. */
    static KafkaStatusBackingStore armedStore(FakeSidecar sidecar, StubLog log) throws Exception {
        return armedStore(sidecar, log, jsonConverter());
    }

    /** As {@link #armedStore(FakeSidecar, StubLog)}, its records serialized by {@code converter}. */
    static KafkaStatusBackingStore armedStore(FakeSidecar sidecar, StubLog log, JsonConverter converter)
            throws Exception {
        return armedStore(sidecar, log, converter, "", new Warnings());
    }

    /**
     * As {@link #armedStore(FakeSidecar, StubLog, JsonConverter)}, with {@code extra} options (",name=value..." or
     * "") and the agent's lines through {@code warnings}.
     */
    static KafkaStatusBackingStore armedStore(FakeSidecar sidecar, StubLog log, JsonConverter converter, String extra,
                                              Warnings warnings) throws Exception {
        StoreHooks.arm(AgentOptions.parse("url=" + sidecar.url() + ",lease.ms=1000,read.timeout.ms=500,"
                + "connect.timeout.ms=200,poll.interval.ms=50,probe.interval.ms=50,stop.timeout.ms=200" + extra,
                Collections.<String, String>emptyMap()), warnings);
        KafkaStatusBackingStore store = new KafkaStatusBackingStore(Time.SYSTEM, converter, () -> null, "connect-it-");
        DistributedConfig config = workerConfig();
        store.configure(config);
        setField(store, "kafkaLog", log);
        StoreHooks.onConfigure(store, config);
        BoundStore bound = StoreHooks.bound();
        store.start();
        // A precondition, not what the tests measure: in a fresh JVM at a load of 16 to 20 on two cores, two CPU
        // burners beside it, the handover took more than 3 s in 2 runs of 2 (the agent's first exchanges with the
        // sidecar, against its 500 ms read timeout). The wait ends as soon as it is handed over.
        await(() -> bound.router().path() == Router.Path.SIDECAR, 30_000, "handed over");
        return store;
    }

    /** The states of the records of {@code key} the stub log sent, in order. */
    static List<String> states(StubLog log, String key) {
        synchronized (log.sent) {
            return log.sent.stream().filter(sent -> sent.key.equals(key))
                    .map(sent -> sent.value == null ? "tombstone"
                            : new String(sent.value, StandardCharsets.UTF_8).replaceAll(".*\"state\":\"([A-Z]+)\".*", "$1"))
                    .collect(Collectors.toList());
        }
    }

    /** A worker's configuration, its cluster id set as the worker looks it up (no broker needed). */
    static DistributedConfig workerConfig() throws Exception {
        Map<String, String> props = new HashMap<>();
        props.put("bootstrap.servers", "127.0.0.1:1");
        props.put("group.id", "connect-it");
        props.put("config.storage.topic", "connect-configs");
        props.put("offset.storage.topic", "connect-offsets");
        props.put("status.storage.topic", "connect-status");
        props.put("key.converter", JsonConverter.class.getName());
        props.put("value.converter", JsonConverter.class.getName());
        DistributedConfig config = new DistributedConfig(props);
        // The worker looked its cluster id up before building the store: no broker needed here.
        setField(config, WorkerConfig.class, "kafkaClusterId", "cluster-1");
        return config;
    }

    static Object readField(Object target, String name) throws Exception {
        Field f = target.getClass().getDeclaredField(name);
        f.setAccessible(true);
        return f.get(target);
    }

    static void setField(Object target, String name, Object value) throws Exception {
        setField(target, target.getClass(), name, value);
    }

    static void setField(Object target, Class<?> owner, String name, Object value) throws Exception {
        Field f = owner.getDeclaredField(name);
        f.setAccessible(true);
        f.set(target, value);
    }

    /** Waits until {@code condition} holds, failing the test after {@code ms}. */
    static void await(BooleanSupplier condition, long ms, String what) throws InterruptedException {
        long deadline = System.nanoTime() + ms * 1_000_000;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not within " + ms + " ms: " + what);
            }
            Thread.sleep(5);
        }
    }
}
