package io.statusstore.agent.connect;

import io.statusstore.agent.Warnings;
import io.statusstore.agent.path.AgentLines;
import io.statusstore.agent.path.FakeSidecar;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.connect.runtime.AbstractStatus;
import org.apache.kafka.connect.runtime.ConnectorStatus;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

import static io.statusstore.agent.connect.StoreFixture.armedStore;
import static io.statusstore.agent.connect.StoreFixture.await;
import static io.statusstore.agent.connect.StoreFixture.holdingSidecar;
import static io.statusstore.agent.connect.StoreFixture.jsonConverter;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The store's own warnings, against Connect 4.4.0's real KafkaStatusBackingStore: at most once a minute per cause, a
 * repeat counted in the next line, so that a flush that times out at every rebalance, or a fault on every write, costs
 * a line a minute and says how often it came.
 */
class StoreWarningsTest extends InstrumentedStoreTest {
    private static final String MORE = " more like it since the last such line)";

    private final AtomicLong clock = new AtomicLong(1_000);

    @Test
    void aFlushThatTimesOutAgainAndAgainIsOneLineAMinuteWithACount() throws Exception {
        FakeSidecar sidecar = holdingSidecar();
        try {
            KafkaStatusBackingStore store = armedStore(sidecar, new StubLog(), jsonConverter(), ",flush.timeout.ms=20",
                    new Warnings(clock::get));
            AgentLines log = new AgentLines();
            store.put(new ConnectorStatus("c", AbstractStatus.State.RUNNING, "w:8083", 1));
            await(() -> sidecar.pendingCount() == 1, 3_000, "pending at the sidecar");
            store.flush();
            store.flush();
            String flush = "flush: 1 key(s) not settled after 20 ms (flush.timeout.ms); the rebalance goes on";
            assertEquals(1, containing(log, flush).size(), "one line for two flushes within a minute: " + log.lines());
            clock.addAndGet(Warnings.INTERVAL_MS);
            store.flush();
            List<String> lines = containing(log, flush);
            assertEquals(2, lines.size(), lines.toString());
            assertTrue(lines.get(1).endsWith(flush + " (1" + MORE), "the next line counts the flush not logged: " + lines);
        } finally {
            sidecar.stop();
            StoreHooks.disarm();
        }
    }

    @Test
    void anAgentFaultIsLoggedOnceAMinuteWithACountItsStackTraceTheFirstTimeOnly() throws Exception {
        FakeSidecar sidecar = holdingSidecar();
        try {
            KafkaStatusBackingStore store = armedStore(sidecar, new StubLog(), jsonConverter(), "",
                    new Warnings(clock::get));
            AgentLines log = new AgentLines();
            readsWhatIsNoRecordOfItsTopic(store);
            int withTrace = log.allLines();
            assertTrue(withTrace > 1, "the first line has its stack trace");
            readsWhatIsNoRecordOfItsTopic(store);
            readsWhatIsNoRecordOfItsTopic(store);
            String fault = "agent fault (the write went to Connect's own store";
            assertEquals(1, containing(log, fault).size(), "one line for three faults within a minute: " + log.lines());
            clock.addAndGet(Warnings.INTERVAL_MS);
            readsWhatIsNoRecordOfItsTopic(store);
            List<String> lines = containing(log, fault);
            assertEquals(2, lines.size(), "a fault a minute later is logged again: " + log.lines());
            assertTrue(lines.get(1).endsWith("(2" + MORE), "it counts the faults not logged: " + lines);
            assertFalse(lines.get(1).contains("logged once"), lines.toString());
            assertEquals(withTrace + 1, log.allLines(), "no stack trace the second time");
        } finally {
            sidecar.stop();
            StoreHooks.disarm();
        }
    }

    /** The store's read hook is handed a record whose value is not bytes: the agent's cast fails, a fault. */
    private static void readsWhatIsNoRecordOfItsTopic(KafkaStatusBackingStore store) {
        StoreHooks.onRead(store, new ConsumerRecord<>("connect-status", 0, 0L, "status-connector-c", "not bytes"));
    }

    private static List<String> containing(AgentLines log, String text) throws IOException {
        return log.lines().stream().filter(line -> line.contains(text)).collect(Collectors.toList());
    }
}
