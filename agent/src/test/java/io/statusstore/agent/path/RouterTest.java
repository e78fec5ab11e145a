package io.statusstore.agent.path;

import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.status.StatusUpdate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The sender's wait: it looks at the table, decides to wait, then waits, and a worker's thread can signal it in
 * between (a read back, a write). Each test plays the sender's steps on this thread, the signal in that gap, and
 * fails by its timeout if the wait misses the signal.
 */
class RouterTest {
    private static final long HOUR_MS = TimeUnit.HOURS.toMillis(1);

    private final ReadBack readBack = new ReadBack(16, HOUR_MS);
    private final Router router = new Router(16, new AgentMetrics(), readBack);

    private static StatusUpdate unassigned(int task) {
        return StatusUpdate.task("c", task, "UNASSIGNED", null, "127.0.0.1:8083", 1, true, null, true, null);
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aReadBackWhileTheSenderLooksEndsItsNextWait() throws Exception {
        StatusUpdate written = unassigned(0);
        readBack.watch(written.key, 0);
        // The sender looks: the sidecar's write is not read back yet, so it has nothing to do but wait.
        assertNull(router.verify(0));
        // The worker's store reads it back now, before the sender waits: no one is waiting to be notified.
        readBack.read(written.key, Topic.value(written));
        // Its wait (up to the probe interval; an hour here) ends at once, and the next look settles the write. Missed,
        // a flush waiting for that write waited out its whole flush.timeout.ms.
        router.await(HOUR_MS);
        assertEquals(1, readBack.takeRead().size());
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aWriteTakenWhileTheSenderLooksEndsItsNextWait() throws Exception {
        router.toQuiescing();
        assertTrue(router.toSidecar());
        assertTrue(router.takeBatch(10, 0).isEmpty());
        assertTrue(router.offer(unassigned(0)));
        router.await(HOUR_MS);
        assertEquals(1, router.takeBatch(10, 0).size());
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aWaitWithNoNewSignalWaitsUntilOneComes() throws Exception {
        Thread sender = new Thread(() -> {
            try {
                router.await(HOUR_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "test-sender");
        sender.start();
        Harness.await(() -> sender.getState() == Thread.State.TIMED_WAITING, 10_000, "the sender waiting");
        router.wake();
        sender.join(10_000);
        assertTrue(!sender.isAlive(), "the signal did not end the wait");
    }
}
