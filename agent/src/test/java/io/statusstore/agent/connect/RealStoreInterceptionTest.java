package io.statusstore.agent.connect;

import io.statusstore.agent.AgentOptions;
import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.path.FakeSidecar;
import io.statusstore.agent.path.Router;
import io.statusstore.agent.path.Topic;
import net.bytebuddy.ByteBuddy;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.ClassFileLocator;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.pool.TypePool;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.AbstractStatus;
import org.apache.kafka.connect.runtime.ConnectorStatus;
import org.apache.kafka.connect.runtime.TaskStatus;
import org.apache.kafka.connect.runtime.TopicStatus;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;
import org.apache.kafka.connect.util.ConnectorTaskId;
import org.junit.jupiter.api.Test;

import javax.management.MBeanServer;
import javax.management.ObjectName;
import java.io.File;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import static io.statusstore.agent.connect.StoreFixture.await;
import static io.statusstore.agent.connect.StoreFixture.connectPath;
import static io.statusstore.agent.connect.StoreFixture.setField;
import static io.statusstore.agent.connect.StoreFixture.states;
import static io.statusstore.agent.connect.StoreFixture.withHeldStore;
import static io.statusstore.agent.connect.StoreFixture.workerConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The agent's matchers and advice against the real KafkaStatusBackingStore: Connect 4.4.0's, loaded in this
 * JVM and instrumented through ByteBuddy's agent, and Connect 3.9.2's, read from its jar.
 */
class RealStoreInterceptionTest extends InstrumentedStoreTest {
    @Test
    void connect44MatchesEveryMethodAndField() {
        TypePool pool = TypePool.Default.of(ClassFileLocator.ForClassLoader.of(getClass().getClassLoader()));
        assertEquals(Collections.emptyList(), StoreShape.missing(TypeDescription.ForLoadedType.of(KafkaStatusBackingStore.class), pool));
    }

    @Test
    void connect392MatchesEveryMethodAndField() throws Exception {
        File dir = new File(System.getProperty("connect39.dir"));
        ClassFileLocator jars = new ClassFileLocator.Compound(
                ClassFileLocator.ForJarFile.of(new File(dir, "connect-runtime-3.9.2.jar")),
                ClassFileLocator.ForJarFile.of(new File(dir, "kafka-clients-3.9.2.jar")),
                ClassFileLocator.ForClassLoader.ofBootLoader());
        TypePool pool = TypePool.Default.of(jars);
        TypeDescription store = pool.describe(StoreShape.STORE).resolve();
        assertEquals(Collections.emptyList(), StoreShape.missing(store, pool));
        assertTrue(pool.describe("org.apache.kafka.connect.runtime.AbstractStatus").resolve().getDeclaredMethods()
                .filter(net.bytebuddy.matcher.ElementMatchers.named("version")).isEmpty(), "3.9 statuses have no version()");
    }

    @Test
    void anUnknownStoreIsNamedWithWhatItLacks() {
        TypePool pool = TypePool.Default.of(ClassFileLocator.ForClassLoader.of(getClass().getClassLoader()));
        List<String> missing = StoreShape.missing(TypeDescription.ForLoadedType.of(NotAStore.class), pool);
        assertTrue(missing.contains("putSafe(TaskStatus)"), missing.toString());
        assertTrue(missing.contains("field kafkaLog (org.apache.kafka.connect.util.KafkaBasedLog)"), missing.toString());
        assertFalse(missing.contains("put(ConnectorStatus)"), missing.toString());
    }

    @Test
    void anUnknownStoreIsLeftUntouched() {
        DynamicType.Builder<?> builder = new ByteBuddy().redefine(NotAStore.class);
        assertSame(builder, StoreInterception.store(builder, TypeDescription.ForLoadedType.of(NotAStore.class),
                getClass().getClassLoader(), null, null));
    }

    @Test
    void theWorkersStoreHandsItsWritesToTheSidecarAndFallsBackToItsOwnMethods() throws Exception {
        Topic topic = new Topic();
        FakeSidecar sidecar = new FakeSidecar(topic).start();
        java.util.concurrent.ExecutorService reading = java.util.concurrent.Executors.newSingleThreadExecutor();
        try {
            StoreHooks.arm(AgentOptions.parse("url=" + sidecar.url() + ",lease.ms=2000,read.timeout.ms=1000,"
                    + "connect.timeout.ms=200,poll.interval.ms=50,probe.interval.ms=50,stop.timeout.ms=200",
                    Collections.<String, String>emptyMap()));
            JsonConverter converter = new JsonConverter();
            converter.configure(Collections.singletonMap("schemas.enable", "false"), false);
            KafkaStatusBackingStore store = new KafkaStatusBackingStore(Time.SYSTEM, converter, () -> null, "connect-it-");
            DistributedConfig config = workerConfig();

            store.configure(config);
            assertSame(store, StoreHooks.bound().store, "configure's advice bound the worker's store");
            // What lands on the topic is read back by the store itself, on a thread of its own, as its KafkaBasedLog's
            // consumer hands it over.
            topic.reader((key, value) -> reading.execute(() -> read(store, key, value)));
            // Connect's own KafkaBasedLog would reach for brokers: put a stub in its place, and bind again to it.
            StubLog log = new StubLog();
            setField(store, "kafkaLog", log);
            StoreHooks.onConfigure(store, config);
            BoundStore bound = StoreHooks.bound();
            assertSame(log, bound.kafkaLog);

            store.start();
            await(() -> bound.router().path() == Router.Path.SIDECAR, 3_000, "handed over");
            ConnectorTaskId task0 = new ConnectorTaskId("c", 0);
            store.put(new ConnectorStatus("c", AbstractStatus.State.RUNNING, "w:8083", 1));
            store.putSafe(new TaskStatus(task0, AbstractStatus.State.UNASSIGNED, "w:8083", 2));
            store.put(new TopicStatus("t", task0, 1700000000000L));
            store.deleteTopic("c", "t2");
            store.put(new ConnectorStatus("d", AbstractStatus.State.DESTROYED, "w:8083", 1));
            await(() -> topic.records().size() == 5 && bound.router().size() == 0, 3_000, "five writes settled at the sidecar");
            assertTrue(log.sent.isEmpty(), "nothing through Connect's producer while the sidecar is up");
            List<Map<?, ?>> updates = sidecar.posts().stream().flatMap(p -> ((List<?>) p.get("updates")).stream())
                    .map(u -> (Map<?, ?>) u).collect(Collectors.toList());
            assertEquals(Arrays.asList("connector", "task", "topic", "delete_topic", "connector"),
                    updates.stream().map(u -> u.get("kind")).collect(Collectors.toList()));
            assertEquals(Boolean.TRUE, updates.get(1).get("safe"));
            assertTrue(updates.get(0).containsKey("version"), "Connect 4.4's statuses carry KIP-891's version");
            assertEquals("DESTROYED", updates.get(4).get("state"));

            MBeanServer server = ManagementFactory.getPlatformMBeanServer();
            ObjectName kip = new ObjectName("kafka.connect:type=status-backing-store-metrics,client-id=connect-it-statuses");
            assertEquals(5.0, server.getAttribute(kip, "status-update-success-total"));
            assertEquals(0.0, server.getAttribute(kip, "status-update-retry-total"));
            assertEquals(0.0, server.getAttribute(kip, "status-update-failure-total"));
            ObjectName own = new ObjectName("kafka.connect:type=status-store-agent-metrics,client-id=connect-it-statuses");
            assertEquals(5.0, server.getAttribute(own, "handed-over-total"));
            assertEquals(1.0, server.getAttribute(own, "on-sidecar-path"));

            // The sidecar goes away: the agent gives what is unsettled to the store's own methods.
            sidecar.stop();
            log.failNext.set(2);
            store.put(new ConnectorStatus("c", AbstractStatus.State.PAUSED, "w:8083", 1));
            await(() -> bound.router().path() == Router.Path.CONNECT, 5_000, "fell back");
            await(() -> log.sent.size() == 1, 3_000, "Connect's own store wrote it, after its own re-sends");
            assertEquals("status-connector-c", log.sent.get(0).key);
            assertEquals("{\"state\":\"PAUSED\",\"trace\":null,\"worker_id\":\"w:8083\",\"generation\":1,\"version\":null}",
                    new String(log.sent.get(0).value, StandardCharsets.UTF_8));
            await(() -> bound.sends.started() == 3 && bound.sends.completed() == 3, 3_000,
                    "the record and Connect's two re-sends counted");
            store.put(new ConnectorStatus("e", AbstractStatus.State.RUNNING, "w:8083", 1));
            assertEquals(2, log.sent.size(), "on Connect's own path the original runs in the worker's thread");
            assertTrue(connectPath(store, log, bound).quiet(100));

            assertEquals(0.0, server.getAttribute(own, "on-sidecar-path"));
            assertEquals(2.0, server.getAttribute(own, "path-switches-total"));
            assertEquals(2.0, server.getAttribute(own, "fallen-back-total"), "the drained PAUSED and the direct put");

            store.stop();
            assertEquals(Router.Path.STOPPED, bound.router().path());
        } finally {
            sidecar.stop();
            reading.shutdownNow();
            StoreHooks.disarm();
        }
    }

    @Test
    void stopWaitsOutTheFenceOfWhatTheSidecarHoldsBeforeConnectStops() throws Exception {
        // A sidecar whose writes may land 11 s after its lease (its delivery timeout): stop() waited a fixed
        // stop.timeout.ms + lease.ms + 1 s + 10 s, returned before the fence had passed, and Connect's own stop then
        // closed its producer with the status not handed to it.
        Topic topic = new Topic();
        FakeSidecar sidecar = new FakeSidecar(topic);
        sidecar.writeBoundMs = 11_000;
        sidecar.writeAtOnce = false;
        sidecar.start();
        try {
            StoreHooks.arm(AgentOptions.parse("url=" + sidecar.url() + ",lease.ms=2000,read.timeout.ms=1000,"
                    + "connect.timeout.ms=200,poll.interval.ms=50,probe.interval.ms=50,stop.timeout.ms=200",
                    Collections.<String, String>emptyMap()));
            JsonConverter converter = new JsonConverter();
            converter.configure(Collections.singletonMap("schemas.enable", "false"), false);
            KafkaStatusBackingStore store = new KafkaStatusBackingStore(Time.SYSTEM, converter, () -> null, "connect-it-");
            DistributedConfig config = workerConfig();
            store.configure(config);
            StubLog log = new StubLog();
            setField(store, "kafkaLog", log);
            StoreHooks.onConfigure(store, config);
            BoundStore bound = StoreHooks.bound();
            store.start();
            await(() -> bound.router().path() == Router.Path.SIDECAR, 3_000, "handed over");
            store.put(new ConnectorStatus("c", AbstractStatus.State.RUNNING, "w:8083", 1));
            await(() -> sidecar.pendingCount() == 1, 3_000, "pending at the sidecar");
            sidecar.stop();
            store.stop();
            assertEquals(1, log.sent.size(), "Connect's path took the status before its own stop went on");
            assertEquals("status-connector-c", log.sent.get(0).key);
        } finally {
            sidecar.stop();
            StoreHooks.disarm();
        }
    }

    @Test
    void aHeldStatusWrittenThroughConnectIsSentAgainWhenConnectAbandonsItsRetry() throws Exception {
        // The fault matrix's sidecars stopped with Kafka away: PAUSED statuses taken at generation 16 waited at the
        // sidecar, then past their fence went through Connect's path; the worker's generation had moved to 21 by then,
        // and the broker, back, failed the first attempt (not the partition's leader). Connect abandons a retry once
        // its store's generation moved: the keys kept RUNNING where the stock workers, which had written PAUSED at
        // once, showed PAUSED.
        withHeldStore((sidecar, log, store, bound) -> {
            store.put(new ConnectorStatus("p", AbstractStatus.State.PAUSED, "w:8083", 16));
            store.put(new ConnectorStatus("p2", AbstractStatus.State.PAUSED, "w:8083", 16));
            // A task stopping (putSafe UNASSIGNED), as a deleted connector's does.
            store.putSafe(new TaskStatus(new ConnectorTaskId("p", 0), AbstractStatus.State.UNASSIGNED, "w:8083", 16));
            await(() -> sidecar.pendingCount() == 3, 3_000, "pending at the sidecar");
            // The drain's three attempts get no outcome yet: the broker is away.
            log.holdNext.set(3);
            sidecar.stop();
            await(() -> bound.router().path() == Router.Path.CONNECT && log.heldCount() == 3, 10_000,
                    "the held statuses handed to Connect's producer past their fence");
            // The worker's generation moved meanwhile: its next status, on Connect's path, says so to the store. And
            // p2 got a newer status: its older one must not be sent again over it.
            store.put(new ConnectorStatus("q", AbstractStatus.State.RUNNING, "w:8083", 21));
            store.put(new ConnectorStatus("p2", AbstractStatus.State.RUNNING, "w:8083", 21));
            log.failHeld();
            await(() -> states(log, "status-connector-p").contains("PAUSED"), 3_000,
                    "p's PAUSED sent again after Connect abandoned its retry: " + states(log, "status-connector-p"));
            await(() -> states(log, "status-task-p-0").contains("UNASSIGNED"), 3_000,
                    "the putSafe UNASSIGNED sent again too, Connect's rules judging it again");
            StoreOriginals originals = connectPath(store, log, bound);
            await(() -> originals.quiet(100), 3_000, "Connect's path quiet");
            assertEquals(Collections.singletonList("RUNNING"), states(log, "status-connector-p2"),
                    "p2's older PAUSED not sent again over its newer RUNNING");
            assertFalse(bound.drained.watched("status-connector-p"), "p's PAUSED landed: no longer watched");
            store.stop();
        });
    }

    @Test
    void aHeldStatusWrittenThroughConnectLeavesTheStoresGenerationWhereTheWorkerMovedIt() throws Exception {
        // Connect abandons the retry of a failed status once its store's generation moved, and its original put sets
        // that generation to the status's own: a status the agent held (generation 16) and drained after the worker's
        // newer one (generation 21) took the store's generation back, and the newer status, failing then, was
        // abandoned. A stock worker's generation only moves forward, with the statuses it is asked to write.
        withHeldStore((sidecar, log, store, bound) -> {
            store.put(new ConnectorStatus("p", AbstractStatus.State.PAUSED, "w:8083", 16));
            await(() -> sidecar.pendingCount() == 1, 3_000, "pending at the sidecar");
            sidecar.stop();
            await(() -> bound.router().path() == Router.Path.FENCING, 3_000, "left the sidecar");
            // The worker's newer status of another key goes through Connect's path at once; its attempt is in flight.
            log.holdNext.set(1);
            store.put(new ConnectorStatus("q", AbstractStatus.State.RUNNING, "w:8083", 21));
            assertEquals(1, log.heldCount());
            await(() -> states(log, "status-connector-p").contains("PAUSED"), 10_000, "p drained past its fence");
            log.failHeld();
            await(() -> states(log, "status-connector-q").contains("RUNNING"), 3_000,
                    "q's RUNNING sent again by Connect's own retry: " + states(log, "status-connector-q"));
            store.stop();
        });
    }

    @Test
    void connectsOwnPutOfAnOlderGenerationLandsOverAnotherWorkersNewerStatusInEveryStore() throws Exception {
        // What the agent's guard is measured against: Connect's read side has no generation check (only an incoming
        // task UNASSIGNED is ignored over a cached RUNNING), so the last record of a key is its status, in the cache of
        // the worker that wrote it and of every other worker (what their REST shows).
        StoreHooks.disarm();
        StubLog logA = new StubLog();
        KafkaStatusBackingStore a = unboundStore(logA);
        KafkaStatusBackingStore b = unboundStore(new StubLog());
        byte[] newer = value("RUNNING", "b:8083", 21);
        read(a, "status-connector-p", newer);
        read(b, "status-connector-p", newer);
        a.put(new ConnectorStatus("p", AbstractStatus.State.PAUSED, "a:8083", 16));
        assertEquals(Collections.singletonList("PAUSED"), states(logA, "status-connector-p"), "the plain put was sent");
        for (KafkaStatusBackingStore store : Arrays.asList(a, b)) {
            read(store, "status-connector-p", logA.sent.get(0).value);
            ConnectorStatus status = store.get("p");
            assertEquals("a:8083/16/PAUSED", status.workerId() + "/" + status.generation() + "/" + status.state(),
                    "the older generation's record replaced the newer in the store's cache");
        }
    }

    @Test
    void aHeldStatusIsNotDrainedOverAnotherWorkersNewerStatusTheStoreReadMeanwhile() throws Exception {
        // A rebalance moved the connector while its status (generation 16) waited at a sidecar that could not write:
        // the worker it moved to wrote its own (generation 21), and this worker's store read it. A stock worker wrote
        // its status when asked, before the other's: the agent's late one must not land over the newer.
        withHeldStore((sidecar, log, store, bound) -> {
            store.put(new ConnectorStatus("p", AbstractStatus.State.PAUSED, "w:8083", 16));
            store.putSafe(new TaskStatus(new ConnectorTaskId("p", 0), AbstractStatus.State.UNASSIGNED, "w:8083", 16));
            await(() -> sidecar.pendingCount() == 2, 3_000, "pending at the sidecar");
            read(store, "status-connector-p", value("RUNNING", "b:8083", 21));
            read(store, "status-task-p-0", value("RUNNING", "b:8083", 21));
            sidecar.stop();
            await(() -> bound.router().path() == Router.Path.CONNECT && bound.router().size() == 0, 10_000,
                    "the held statuses past their fence");
            StoreOriginals originals = connectPath(store, log, bound);
            await(() -> originals.quiet(100), 3_000, "quiet");
            assertEquals(Collections.emptyList(), states(log, "status-connector-p"), "no late PAUSED over b's RUNNING");
            assertEquals(Collections.emptyList(), states(log, "status-task-p-0"), "no late UNASSIGNED over b's RUNNING");
            assertEquals("b:8083", store.get("p").workerId());
            ObjectName own = new ObjectName("kafka.connect:type=status-store-agent-metrics,client-id=connect-it-statuses");
            assertEquals(2.0, ManagementFactory.getPlatformMBeanServer().getAttribute(own, "overtaken-total"));
            assertEquals(0.0, ManagementFactory.getPlatformMBeanServer().getAttribute(own, "fallen-back-total"));
            store.stop();
        });
    }

    @Test
    void aHeldStatusIsNotWrittenAgainOverAnotherWorkersNewerStatusAfterConnectAbandonsItsRetry() throws Exception {
        // The held status's first attempt went out past its fence and failed (the broker back, not the leader); the
        // worker's generation had moved, so Connect abandoned its retry and the agent writes it again. Meanwhile the
        // worker the connector moved to wrote its newer status, and this worker's store read it.
        withHeldStore((sidecar, log, store, bound) -> {
            store.put(new ConnectorStatus("p", AbstractStatus.State.PAUSED, "w:8083", 16));
            await(() -> sidecar.pendingCount() == 1, 3_000, "pending at the sidecar");
            log.holdNext.set(1);
            sidecar.stop();
            await(() -> bound.router().path() == Router.Path.CONNECT && log.heldCount() == 1, 10_000,
                    "the held status handed to Connect's producer past its fence");
            store.put(new ConnectorStatus("q", AbstractStatus.State.RUNNING, "w:8083", 21));
            read(store, "status-connector-p", value("RUNNING", "b:8083", 21));
            log.failHeld();
            StoreOriginals originals = connectPath(store, log, bound);
            await(() -> !bound.drained.watched("status-connector-p") && originals.quiet(100), 3_000,
                    "the failed attempt settled");
            assertEquals(Collections.emptyList(), states(log, "status-connector-p"), "no late PAUSED over b's RUNNING");
            assertEquals(Collections.singletonList("RUNNING"), states(log, "status-connector-q"));
            store.stop();
        });
    }

    @Test
    void aHeldStatusThatLandsRightAfterATombstoneTheStoreHadNotReadIsUndone() throws Exception {
        // The owner stopped the deleted connector (its putSafe UNASSIGNED) while the sidecar could not write; the
        // leader's agent held its tombstone too, and both fences ended together: the tombstone landed first, read by
        // this store only after the UNASSIGNED went out, and the UNASSIGNED landed right after it. A stock worker's
        // UNASSIGNED, written when asked, landed before the leader's tombstone.
        withHeldStore((sidecar, log, store, bound) -> {
            store.putSafe(new ConnectorStatus("d", AbstractStatus.State.UNASSIGNED, "w:8083", 85));
            await(() -> sidecar.pendingCount() == 1, 3_000, "pending at the sidecar");
            sidecar.stop();
            await(() -> states(log, "status-connector-d").contains("UNASSIGNED"), 10_000, "d drained past its fence");
            // The first attempt to write the tombstone again fails as an outage's would: it is made again.
            log.failNext.set(1);
            read(store, "status-connector-d", null);
            read(store, "status-connector-d", value("UNASSIGNED", "w:8083", 85));
            await(() -> states(log, "status-connector-d").equals(Arrays.asList("UNASSIGNED", "tombstone")), 3_000,
                    "the tombstone written again: " + states(log, "status-connector-d"));
            ObjectName own = new ObjectName("kafka.connect:type=status-store-agent-metrics,client-id=connect-it-statuses");
            assertEquals(1.0, ManagementFactory.getPlatformMBeanServer().getAttribute(own, "undone-total"));
            // Its own record read back, nothing more is written; a later record of the key is someone else's to judge.
            read(store, "status-connector-d", null);
            read(store, "status-connector-d", value("RUNNING", "b:8083", 90));
            Thread.sleep(300);
            assertEquals(Arrays.asList("UNASSIGNED", "tombstone"), states(log, "status-connector-d"));
            store.stop();
        });
    }

    @Test
    void aHeldStatusIsStillDrainedOverAnOlderGenerationOrItsOwnWorkersStatus() throws Exception {
        // Connect's safe-write rule: another worker's older generation, or this worker's own status, does not stop it.
        withHeldStore((sidecar, log, store, bound) -> {
            store.put(new ConnectorStatus("older", AbstractStatus.State.PAUSED, "w:8083", 16));
            store.put(new ConnectorStatus("own", AbstractStatus.State.PAUSED, "w:8083", 16));
            store.put(new ConnectorStatus("same", AbstractStatus.State.PAUSED, "w:8083", 16));
            await(() -> sidecar.pendingCount() == 3, 3_000, "pending at the sidecar");
            read(store, "status-connector-older", value("RUNNING", "b:8083", 15));
            read(store, "status-connector-own", value("RUNNING", "w:8083", 21));
            read(store, "status-connector-same", value("RUNNING", "b:8083", 16));
            sidecar.stop();
            await(() -> bound.router().path() == Router.Path.CONNECT && bound.router().size() == 0, 10_000,
                    "the held statuses past their fence");
            for (String key : Arrays.asList("status-connector-older", "status-connector-own", "status-connector-same")) {
                assertEquals(Collections.singletonList("PAUSED"), states(log, key), key);
            }
            store.stop();
        });
    }


    /** A store Connect's own (the agent not armed), its log the stub. */
    private static KafkaStatusBackingStore unboundStore(StubLog log) throws Exception {
        JsonConverter converter = new JsonConverter();
        converter.configure(Collections.singletonMap("schemas.enable", "false"), false);
        KafkaStatusBackingStore store = new KafkaStatusBackingStore(Time.SYSTEM, converter, () -> null, "connect-it-");
        store.configure(workerConfig());
        setField(store, "kafkaLog", log);
        return store;
    }

    /** A status record's value as Connect writes it. */
    private static byte[] value(String state, String workerId, int generation) {
        return ("{\"state\":\"" + state + "\",\"trace\":null,\"worker_id\":\"" + workerId + "\",\"generation\":"
                + generation + ",\"version\":null}").getBytes(StandardCharsets.UTF_8);
    }


    @Test
    void withoutTheAgentArmedTheStoreIsConnectsOwn() throws Exception {
        StoreHooks.disarm();
        JsonConverter converter = new JsonConverter();
        converter.configure(Collections.singletonMap("schemas.enable", "false"), false);
        KafkaStatusBackingStore store = new KafkaStatusBackingStore(Time.SYSTEM, converter, () -> null, "connect-it-");
        store.configure(workerConfig());
        assertEquals(null, StoreHooks.bound());
        // Connect's own log was never started: its original put reaches for a producer it has not got.
        assertThrows(IllegalStateException.class,
                () -> store.put(new ConnectorStatus("c", AbstractStatus.State.RUNNING, "w:8083", 1)));
    }

    @Test
    void theWorkersOwnProducerIsAskedWithATombstoneNoOneHoldsOnEachPartitionConcerned() throws Exception {
        JsonConverter converter = new JsonConverter();
        converter.configure(Collections.singletonMap("schemas.enable", "false"), false);
        KafkaStatusBackingStore store = new KafkaStatusBackingStore(Time.SYSTEM, converter, () -> null, "connect-it-");
        StubLog log = new StubLog();
        StoreOriginals originals = new StoreOriginals(store, log, new SendCount(), null, new AgentMetrics());
        List<String> keys = Arrays.asList("status-task-conn-0", "status-connector-conn", "status-task-my-conn-12");
        assertEquals(Boolean.TRUE, originals.canWrite(keys).get(5, java.util.concurrent.TimeUnit.SECONDS));
        // Java's partitioner places these on 4, 2 and 2 of 5 partitions (checked against Kafka's own in REFERENCE.md).
        assertEquals(4, ProbeRecord.partition("status-task-conn-0", 5));
        assertEquals(2, ProbeRecord.partition("status-connector-conn", 5));
        assertEquals(2, ProbeRecord.partition("status-task-my-conn-12", 5));
        List<Integer> partitions = log.sent.stream().map(sent -> ProbeRecord.partition(sent.key, 5)).sorted()
                .collect(Collectors.toList());
        assertEquals(Arrays.asList(2, 4), partitions, "one write per partition concerned: " + log.sent.size());
        for (StubLog.Sent sent : log.sent) {
            assertEquals(null, sent.value, "a tombstone");
            assertTrue(sent.key.startsWith("status-topic-status-store agent probe "), sent.key);
            // Connect's own store reads it as the deletion of a topic status it does not hold: nothing changes.
            read(store, sent.key, null);
        }
        assertTrue(store.getAllTopics("status-store-agent").isEmpty());
        log.failNext.set(1);
        assertEquals(Boolean.FALSE, originals.canWrite(keys).get(5, java.util.concurrent.TimeUnit.SECONDS));
    }

    /** The store reads one record of its topic, as its KafkaBasedLog's consumer hands it (the agent's advice too). */
    private static void read(KafkaStatusBackingStore store, String key, byte[] value) {
        try {
            java.lang.reflect.Method read = KafkaStatusBackingStore.class.getDeclaredMethod("read",
                    org.apache.kafka.clients.consumer.ConsumerRecord.class);
            read.setAccessible(true);
            read.invoke(store, new org.apache.kafka.clients.consumer.ConsumerRecord<>("connect-status", 0, 0L, key, value));
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
        }
    }


    /** A class with only one of the store's methods. */
    @SuppressWarnings("unused")
    public static final class NotAStore {
        public void put(ConnectorStatus status) {
        }
    }
}
