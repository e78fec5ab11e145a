package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** KIP-1278's counters of a worker on the sidecar say what the sidecar wrote for it. */
class OutcomesTest {
    @Test
    void aWriteGivenBackAndSentAgainCountsOnceWithEveryAttemptTheSidecarSpentOnIt() throws Exception {
        // Kafka away behind the sidecar: it gave the write up after its retries ("expired", 3 attempts), the agent sent
        // it again, and it was written after 3 more. Before, the worker's counters took only the last seq's outcome:
        // retry total 2 where the sidecar had retried the write 5 times.
        try (Harness h = new Harness()) {
            // A write bound long enough that rule 5 (no outcome within it) never asks meanwhile on a loaded machine.
            h.sidecar.writeBoundMs = 30_000;
            h.sidecar.attempts.put("status-task-c-0", 3L);
            h.start("");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "PAUSED");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "PAUSED pending");
            assertEquals(1, h.sidecar.giveUp());
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "PAUSED sent again");
            assertEquals(0, h.metrics.successTotal(), "a write given back is not settled");
            assertEquals(0, h.metrics.retryTotal(), "nor counted until its outcome comes");
            h.sidecar.writeAtOnce = true;
            assertEquals(1, h.sidecar.release());
            Harness.await(() -> h.router.size() == 0, 2_000, "settled, and read back");
            h.assertInvariants();
            assertEquals(1, h.metrics.successTotal());
            assertEquals(0, h.metrics.failureTotal());
            assertEquals(5, h.metrics.retryTotal(), "3 attempts given back, 3 more until written: 5 retries");
        }
    }

    @Test
    void aWriteGivenBackTwiceAndThenFailedCountsOneFailureWithItsRetries() throws Exception {
        try (Harness h = new Harness()) {
            h.sidecar.writeBoundMs = 30_000;
            h.sidecar.attempts.put("status-task-c-0", 2L);
            h.start("");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "PAUSED");
            for (int given = 1; given <= 2; given++) {
                Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "PAUSED pending, time " + given);
                assertEquals(1, h.sidecar.giveUp());
            }
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "PAUSED sent a third time");
            assertEquals(1, h.sidecar.fail());
            Harness.await(() -> h.router.size() == 0, 2_000, "settled");
            assertEquals(0, h.metrics.successTotal());
            assertEquals(1, h.metrics.failureTotal());
            assertEquals(5, h.metrics.retryTotal(), "2 + 2 attempts given back, 2 more until failed: 5 retries");
        }
    }
}
