package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A sidecar cut off from Kafka while the worker is not (the fault matrix's sidecar-stopped-*-kafka-away rows before
 * the broker stops, kafka-cut-*): rule 5 leaves it, and its keys go through Connect's producer. Before, each key waited
 * the write bound, a poll and a second before the agent asked the worker's producer, then the fence of the request
 * that ended the lease (the write bound and a second), about 9 s with the sidecar's defaults, and each rebalance's flush
 * as long: in the fault matrix the pod's workers were still rebalancing when the broker stopped (the workers' logs:
 * "Finished flushing" 9.0 s after the rebalance began, 4.0 s after "falling back"), and finished the workload's steps
 * only once Kafka was back, 2-4 s after a stock worker.
 */
class CutOffSidecarTest {
    private static final long WRITE_BOUND_MS = 5_000;

    @Test
    void writesWaitingForTheirNextAttemptGoThroughConnectOnTheAnswerThatEndsTheLease() throws Exception {
        try (Harness h = cutOff(false)) {
            long taken = FakeSidecar.now();
            h.write("c", 0, "PAUSED");
            Harness.await(() -> !h.connectWrites().isEmpty(), 3 * WRITE_BOUND_MS, "Connect's path wrote the key");
            long written = h.connectWrites().get(0).at;
            assertTrue(written >= taken + WRITE_BOUND_MS, "rule 5 waited the write bound: nothing said otherwise");
            // No attempt of the write was in flight as the lease ended: the sidecar never sends it again, and said so
            // (expired) on the answer, so the key is not held for the fence (the write bound after that request).
            assertTrue(written < h.sidecar.firstLeaseEnd() + WRITE_BOUND_MS,
                    "Connect's path wrote the key only after the fence: " + h.topic.records());
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
        }
    }

    @Test
    void aWriteTheSidecarSaysTimedOutIsOverdueAtOnce() throws Exception {
        try (Harness h = cutOff(false)) {
            h.sidecar.timedOut = true;
            long taken = FakeSidecar.now();
            h.write("c", 0, "PAUSED");
            Harness.await(() -> !h.connectWrites().isEmpty(), 3 * WRITE_BOUND_MS, "Connect's path wrote the key");
            // The sidecar's answer said the write's attempt waited out its write bound: rule 5 asked the worker's
            // producer then, not a write bound, a poll and a second after the write was taken.
            assertTrue(h.connectWrites().get(0).at < taken + WRITE_BOUND_MS,
                    "rule 5 waited its own bound: " + h.topic.records());
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
        }
    }

    @Test
    void theAgentAsksForTheSidecarsWordOnAWriteAtItsWriteBoundNotAPollLater() throws Exception {
        // A poll interval longer than the write bound: the sidecar's timed_out came only on the poll after it, and the
        // worker's probe went then (in the fault matrix, a held partition's probe had gone out meanwhile, and its key
        // waited the fence).
        try (Harness h = new Harness()) {
            h.sidecar.writeBoundMs = 2_000;
            h.start("poll.interval.ms=6000,lease.ms=8000");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.sidecar.timedOut = true;
            h.sidecar.timedOutAfterMs = 2_000;
            h.connect.canWrite = true;
            long taken = FakeSidecar.now();
            h.write("c", 0, "PAUSED");
            Harness.await(() -> !h.connectWrites().isEmpty(), 20_000, "Connect's path wrote the key");
            assertTrue(h.connectWrites().get(0).at < taken + 4_000, "the sidecar's word came a poll interval after "
                    + "the write bound: " + h.topic.records());
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
        }
    }

    @Test
    void aWriteThatMayBeInFlightAsTheLeaseEndsStillWaitsItsFence() throws Exception {
        try (Harness h = cutOff(true)) {
            h.sidecar.timedOut = true;
            h.write("c", 0, "PAUSED");
            Harness.await(() -> !h.connectWrites().isEmpty(), 3 * WRITE_BOUND_MS, "Connect's path wrote the key");
            long written = h.connectWrites().get(0).at;
            assertTrue(written >= h.sidecar.firstLeaseEnd() + WRITE_BOUND_MS,
                    "Connect's path wrote the key before a write the sidecar may still land could have: "
                            + h.topic.records());
            assertTrue(h.topic.via("sidecar").isEmpty(), "the sidecar wrote nothing: " + h.topic.records());
            h.awaitNewestLanded(2_000);
        }
    }

    @Test
    void aWriteInFlightAsTheLeaseEndsWhoseAttemptThenFailsGoesThroughConnectOnThatAnswer() throws Exception {
        try (Harness h = cutOff(true)) {
            // The sidecar's writes time out one after the other: the first says so, and the others are still in flight
            // as the agent ends the lease; their attempts fail moments later, within the answer's wait.
            h.sidecar.timedOut = true;
            h.sidecar.attemptFailsAfterMs = 20;
            h.write("c", 0, "PAUSED");
            Harness.await(() -> !h.connectWrites().isEmpty(), 3 * WRITE_BOUND_MS, "Connect's path wrote the key");
            long written = h.connectWrites().get(0).at;
            assertTrue(written < h.sidecar.firstLeaseEnd() + WRITE_BOUND_MS,
                    "Connect's path wrote the key only after the fence: " + h.topic.records());
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
        }
    }

    @Test
    void aWriteInFlightAsTheLeaseEndsGoesThroughConnectOnceItsAttemptFailsNotAtItsFence() throws Exception {
        try (Harness h = cutOff(true)) {
            // The attempt in flight as the lease ends (a held partition's probe, sent moments before) fails 2 s later:
            // after the answer that ended the lease, before the fence (the write bound and a second from it). Before,
            // the agent no longer asked the sidecar once it had left it, and the key waited the whole fence.
            h.sidecar.timedOut = true;
            h.sidecar.attemptFailsAfterMs = 2_000;
            h.write("c", 0, "PAUSED");
            Harness.await(() -> !h.connectWrites().isEmpty(), 3 * WRITE_BOUND_MS, "Connect's path wrote the key");
            long written = h.connectWrites().get(0).at;
            long leaseEnded = h.sidecar.firstLeaseEnd();
            // Not before the attempt failed: until then the sidecar might still have written it.
            assertTrue(written >= leaseEnded + 2_000, "Connect's path wrote the key while the sidecar's attempt of it "
                    + "was in flight: " + h.topic.records());
            assertTrue(written < leaseEnded + WRITE_BOUND_MS, "Connect's path wrote the key only at its fence, "
                    + (written - leaseEnded) + " ms after the lease ended: " + h.topic.records());
            assertTrue(h.topic.via("sidecar").isEmpty(), "the sidecar wrote nothing: " + h.topic.records());
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
        }
    }

    /**
     * On the sidecar, which then cannot reach Kafka: its writes wait (in flight, or for their next attempt), while the
     * worker's own producer writes.
     */
    private static Harness cutOff(boolean inFlight) throws Exception {
        Harness h = new Harness();
        h.sidecar.writeBoundMs = WRITE_BOUND_MS;
        h.start("");
        h.awaitPath(Router.Path.SIDECAR, 2_000);
        h.sidecar.writeAtOnce = false;
        h.sidecar.inFlight = inFlight;
        h.connect.canWrite = true;
        return h;
    }
}
