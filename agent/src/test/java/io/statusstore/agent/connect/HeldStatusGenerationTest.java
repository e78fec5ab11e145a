package io.statusstore.agent.connect;

import io.statusstore.agent.path.FakeSidecar;
import io.statusstore.agent.path.Router;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.AbstractStatus;
import org.apache.kafka.connect.runtime.ConnectorStatus;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;
import org.junit.jupiter.api.Test;

import java.util.Collections;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.statusstore.agent.connect.StoreFixture.armedStore;
import static io.statusstore.agent.connect.StoreFixture.await;
import static io.statusstore.agent.connect.StoreFixture.connectPath;
import static io.statusstore.agent.connect.StoreFixture.holdingSidecar;
import static io.statusstore.agent.connect.StoreFixture.states;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The store's generation while the agent writes a held status through Connect's original method, against Connect
 * 4.4.0's real KafkaStatusBackingStore (instrumented in this JVM): Connect's retry rule, judged in its producer
 * callbacks, must never see the held status's older generation, only the one the worker moved it to.
 */
class HeldStatusGenerationTest extends InstrumentedStoreTest {
    @Test
    void anOlderStatusFailingWhileAHeldOneIsWrittenAgainIsNotSentOverItsKeysNewerOne() throws Exception {
        // Seen once at load (RealStoreInterceptionTest's held-status drain): p2's held PAUSED (generation 16), then its
        // newer RUNNING (21), and the PAUSED sent again over it. The agent writing p's held PAUSED again runs Connect's
        // put, which sets the store's generation to 16 under the store's lock and serializes the record after it; the
        // agent takes the generation back up only as the record goes to the producer (StoreGeneration). p2's PAUSED
        // failing in that window was judged by Connect's callback against generation 16, its own, and sent again.
        // The converter holds the window open here, as a thread descheduled there holds it at load.
        FakeSidecar sidecar = holdingSidecar();
        PausingConverter converter = new PausingConverter();
        Thread failing = new Thread(() -> { }, "stub-producer-network-thread");
        try {
            StubLog log = new StubLog();
            KafkaStatusBackingStore store = armedStore(sidecar, log, converter);
            BoundStore bound = StoreHooks.bound();
            store.put(new ConnectorStatus("p", AbstractStatus.State.PAUSED, "w:8083", 16));
            store.put(new ConnectorStatus("p2", AbstractStatus.State.PAUSED, "w:8083", 16));
            await(() -> sidecar.pendingCount() == 2, 3_000, "pending at the sidecar");
            log.holdNext.set(2);
            sidecar.stop();
            await(() -> bound.router().path() == Router.Path.CONNECT && log.heldCount() == 2, 10_000,
                    "the held statuses handed to Connect's producer past their fence");
            store.put(new ConnectorStatus("q", AbstractStatus.State.RUNNING, "w:8083", 21));
            store.put(new ConnectorStatus("p2", AbstractStatus.State.RUNNING, "w:8083", 21));
            // p's attempt fails: Connect abandons its retry (the generation moved), and the agent writes it again on
            // Connect's retry thread, which stops in the window, the store's generation 16.
            converter.pauseAt.set(true);
            log.failHeld("status-connector-p");
            assertTrue(converter.paused.await(10, TimeUnit.SECONDS), "p's PAUSED written again");
            // p2's older PAUSED fails meanwhile, on the producer's thread: Connect's callback judges it.
            failing = new Thread(() -> log.failHeld("status-connector-p2"), "stub-producer-network-thread");
            failing.start();
            Thread judging = failing;
            await(() -> !judging.isAlive() || judging.getState() == Thread.State.WAITING
                    || judging.getState() == Thread.State.TIMED_WAITING || judging.getState() == Thread.State.BLOCKED,
                    3_000, "p2's failure judged, or waiting to be");
            converter.release.countDown();
            failing.join(10_000);
            assertFalse(failing.isAlive(), "p2's failure judged once p's record went");
            await(() -> states(log, "status-connector-p").contains("PAUSED"), 3_000, "p's PAUSED written again");
            StoreOriginals originals = connectPath(store, log, bound);
            await(() -> originals.quiet(100), 3_000, "Connect's path quiet");
            assertEquals(Collections.singletonList("RUNNING"), states(log, "status-connector-p2"),
                    "p2's older PAUSED not sent again over its newer RUNNING");
            store.stop();
        } finally {
            converter.release.countDown();
            failing.join(10_000);
            sidecar.stop();
            StoreHooks.disarm();
        }
    }

    /** Connect's JSON converter, which once armed stops in the next PAUSED status it serializes until released. */
    private static final class PausingConverter extends JsonConverter {
        final AtomicBoolean pauseAt = new AtomicBoolean();
        final CountDownLatch paused = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);

        PausingConverter() {
            configure(Collections.singletonMap("schemas.enable", "false"), false);
        }

        @Override
        public byte[] fromConnectData(String topic, Schema schema, Object value) {
            if (value instanceof Struct && "PAUSED".equals(((Struct) value).getString("state"))
                    && pauseAt.compareAndSet(true, false)) {
                paused.countDown();
                try {
                    release.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return super.fromConnectData(topic, schema, value);
        }
    }
}
