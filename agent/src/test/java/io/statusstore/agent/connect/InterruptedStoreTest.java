package io.statusstore.agent.connect;

import io.statusstore.agent.Warnings;
import io.statusstore.agent.path.AgentLines;
import io.statusstore.agent.path.FakeSidecar;
import org.apache.kafka.connect.runtime.AbstractStatus;
import org.apache.kafka.connect.runtime.ConnectorStatus;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;
import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicBoolean;

import static io.statusstore.agent.connect.StoreFixture.armedStore;
import static io.statusstore.agent.connect.StoreFixture.await;
import static io.statusstore.agent.connect.StoreFixture.holdingSidecar;
import static io.statusstore.agent.connect.StoreFixture.jsonConverter;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Connect's thread interrupted while the agent waits in the real store's flush or stop (the sidecar holds a write
 * pending): the wait ends and the thread is still interrupted when the store's method returns, as Kafka's producer
 * leaves it (its flush throws InterruptException, which sets the flag again). Before, the agent caught the
 * InterruptedException as an agent fault, logged it with its stack trace and cleared the interrupt: Connect's thread
 * went on as if never interrupted.
 */
class InterruptedStoreTest extends InstrumentedStoreTest {
    @Test
    void anInterruptedFlushReturnsWithTheThreadStillInterrupted() throws Exception {
        assertInterruptKept(KafkaStatusBackingStore::flush);
    }

    @Test
    void anInterruptedStopReturnsWithTheThreadStillInterrupted() throws Exception {
        assertInterruptKept(KafkaStatusBackingStore::stop);
    }

    private interface StoreCall {
        void run(KafkaStatusBackingStore store);
    }

    private static void assertInterruptKept(StoreCall call) throws Exception {
        FakeSidecar sidecar = holdingSidecar();
        try {
            // The flush would wait 20 s for the write the sidecar holds, the stop its fence (the lease, 1 s, and a margin).
            KafkaStatusBackingStore store = armedStore(sidecar, new StubLog(), jsonConverter(),
                    ",flush.timeout.ms=20000", new Warnings());
            AgentLines log = new AgentLines();
            store.put(new ConnectorStatus("c", AbstractStatus.State.RUNNING, "w:8083", 1));
            await(() -> sidecar.pendingCount() == 1, 3_000, "pending at the sidecar");
            AtomicBoolean returned = new AtomicBoolean();
            AtomicBoolean stillInterrupted = new AtomicBoolean();
            Thread connect = new Thread(() -> {
                call.run(store);
                stillInterrupted.set(Thread.currentThread().isInterrupted());
                returned.set(true);
            }, "herder");
            connect.start();
            // Waiting in the agent (a thread blocked in a timed wait), then interrupted.
            await(() -> connect.getState() == Thread.State.TIMED_WAITING, 3_000, "waiting for the sidecar");
            connect.interrupt();
            connect.join(5_000);
            assertTrue(returned.get(), "the store's method returned once interrupted");
            assertTrue(stillInterrupted.get(), "the interrupt is left for Connect");
            assertFalse(log.lines().stream().anyMatch(l -> l.contains("agent fault")), log.lines().toString());
            assertTrue(log.lines().stream().anyMatch(l -> l.contains("was interrupted while the agent waited")),
                    log.lines().toString());
        } finally {
            sidecar.stop();
            StoreHooks.disarm();
        }
    }
}
