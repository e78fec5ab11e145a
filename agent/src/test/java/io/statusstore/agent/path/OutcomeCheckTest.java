package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What the sidecar says of a write is checked against what the worker itself sees (rules 4 and 5): a "written" the
 * worker's own store never reads back, and a "pending" that never ends while the worker's own producer can write.
 * Before, both were believed: 10 statuses lost without a line, keys pending for the worker's life.
 */
class OutcomeCheckTest {
    @Test
    void aSidecarThatSaysWrittenOfWhatItDidNotWriteIsLeftAndConnectWritesIt() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("c", 0, "RUNNING");
            h.awaitNewestLanded(2_000);
            h.sidecar.lying = true;
            for (int i = 0; i < 10; i++) {
                h.write("c", i, "PAUSED");
            }
            // Read back within the sidecar's write bound (0 here) and a margin of 1 s, else the sidecar is not
            // believed; then each key is written through Connect once nothing the sidecar took can land.
            h.awaitNewestLanded(6_000);
            h.assertInvariants();
            assertEquals(10, h.connectWrites().size(), "Connect's own path wrote the ten statuses");
            assertTrue(h.sidecarWrites().size() == 1, "the sidecar wrote only the first: " + h.topic.records());
            Harness.await(() -> h.router.path() == Router.Path.CONNECT, 2_000, "on Connect's own path");
            Thread.sleep(300);
            List<String> lines = log.lines();
            assertTrue(lines.stream().anyMatch(l -> l.contains("has not read it back")), lines.toString());
            assertFalse(lines.stream().anyMatch(l -> l.contains("back on the sidecar")),
                    "a sidecar caught saying what is not is not given statuses again: " + lines);
        }
    }

    /**
     * The sidecar says it wrote c-0, which it did not, and the agent leaves it for another reason (a 503) before c-0's
     * read-back bound has passed: the bound passes while the agent waits c-0's fence, and the sidecar is still caught
     * (rule 4): that instance gets no statuses again, though it answers the probe well. Before, rule 4 was checked only
     * on the sidecar's path, and the next probe handed over to it.
     */
    @Test
    void aSidecarThatSaidWrittenOfWhatItDidNotWriteIsCaughtThoughTheAgentLeftItForAnotherReason() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.lying = true;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.sidecar.posts().size() >= 2, 2_000, "c-0 said written");
            h.sidecar.answering = FakeSidecar.Answering.UNAVAILABLE;
            h.write("d", 0, "RUNNING");
            Harness.await(() -> h.router.path() != Router.Path.SIDECAR, 2_000, "the sidecar left (503)");
            h.sidecar.answering = FakeSidecar.Answering.OK;
            h.sidecar.lying = false;
            // c-0 goes through Connect at its fence (the lease, 400 ms, and a second after the 503), after its read-back
            // bound (a second after the sidecar said it wrote it); then the agent probes every 50 ms.
            h.awaitNewestLanded(4_000);
            Harness.await(() -> h.router.path() == Router.Path.CONNECT, 2_000, "on Connect's own path");
            int requests = h.sidecar.statusRequests();
            Thread.sleep(600);
            assertEquals(requests, h.sidecar.statusRequests(), "no request goes to the instance again");
            assertEquals(Router.Path.CONNECT, h.router.path());
            List<String> lines = log.lines();
            assertFalse(lines.stream().anyMatch(l -> l.contains("back on the sidecar")), lines.toString());
            assertTrue(lines.stream().anyMatch(l -> l.contains("answered what the agent cannot believe")),
                    "the probe says why: " + lines);
        }
    }

    @Test
    void aWritePendingPastTheWriteBoundWhileTheWorkersProducerWritesLeavesTheSidecar() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            // Kafka away for the sidecar only: it takes writes and never gives an outcome.
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "RUNNING");
            h.write("d", 1, "RUNNING");
            h.awaitNewestLanded(8_000);
            h.assertInvariants();
            assertEquals(2, h.connectWrites().size());
            // One question to the worker's own producer, about the writes overdue then (both, or the first only when
            // the second was accepted a request later).
            List<List<String>> asked = h.connect.writeChecks();
            assertEquals(1, asked.size(), "one question to the worker's own producer: " + asked);
            assertEquals("status-task-c-0", asked.get(0).get(0));
            assertTrue(Arrays.asList("status-task-c-0", "status-task-d-1").containsAll(asked.get(0)), asked.toString());
            assertEquals(0, h.sidecar.release(), "past its lease the sidecar writes nothing more");
        }
    }

    @Test
    void aSidecarLeftByRule5IsToldItsLeaseEndedAndItsKeysWaitItsWriteBoundNotALeaseMore() throws Exception {
        // The fault matrix's answers-pending-forever row (bench/fault_matrix.py): the sidecar answers and never gives an
        // outcome; rule 5 left it, and its keys then waited the whole fence of its last request (lease 4 s + write bound
        // 3 s + 1 s, after rule 5's 5 s): a pause showed in Connect's REST 10.9 s after a stock worker's 0.28 s. The
        // agent now ends the session's lease as it leaves (a request whose lease is 1 ms): nothing the sidecar took can
        // land past its write bound from then. A lease of 20 s here: before, nothing went through Connect for 21 s.
        try (Harness h = new Harness().start("lease.ms=20000")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "PAUSED");
            h.awaitNewestLanded(10_000);
            h.assertInvariants();
            assertEquals(1, h.connectWrites().size(), "the worker's own producer wrote the pause: " + h.topic.records());
            Map<?, ?> last = h.sidecar.posts().get(h.sidecar.posts().size() - 1);
            assertEquals(1L, last.get("lease_ms"), "the last request ends the lease: " + last);
            assertEquals(0, h.sidecar.release(), "past its lease the sidecar writes nothing more");
        }
    }

    @Test
    void withKafkaAwayForEveryoneTheStatusesStayWithTheSidecar() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.connect.canWrite = false;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.connect.writeChecks().size() >= 2, 6_000, "asked, and asked again after a bound");
            assertEquals(Router.Path.SIDECAR, h.router.path(), "falling back would be the stock worker's storm");
            assertTrue(h.connectWrites().isEmpty());
            // Kafka back: the sidecar writes what it held.
            h.connect.canWrite = true;
            h.sidecar.writeAtOnce = true;
            assertEquals(1, h.sidecar.release());
            Harness.await(() -> h.router.size() == 0, 2_000, "settled, and read back");
            h.assertInvariants();
            assertEquals(Router.Path.SIDECAR, h.router.path());
        }
    }

    @Test
    void aWriteTheSidecarGivesBackAgainAndAgainWhileTheWorkersProducerWritesLeavesTheSidecar() throws Exception {
        // The fault matrix's kafka-cut-20s-black-holed row (bench/fault_matrix.py): the sidecar cut off from Kafka
        // fails each attempt and, its worker's generation moved, gives the write back ("expired"); sent again, each
        // time a pending write of a new seq. Its time pending began anew each time, so rule 5 never asked the worker's
        // producer, which could write: the pause never landed. The key's time pending counts from the first write the
        // sidecar took and did not write.
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "PAUSED");
            long until = System.nanoTime() / 1_000_000 + 8_000;
            while (h.connectWrites().isEmpty() && System.nanoTime() / 1_000_000 < until) {
                Thread.sleep(200);
                h.sidecar.expire();
            }
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            assertEquals(1, h.connectWrites().size(), "the worker's own producer wrote the pause: " + h.topic.records());
            assertEquals(1, h.connect.writeChecks().size(), "one question to the worker's own producer");
        }
    }

    @Test
    void aQuestionAskedBeforeTheAgentLeftIsNotJudgedAfterItCameBack() throws Exception {
        // The fault matrix's sidecar-stopped-12s-kafka-away row (bench/fault_matrix.py): rule 5's question to the
        // worker's producer was out when the sidecar stopped (the agent left, read timed out); its answer, judged once
        // the agent was back 15 s later, made it leave again at once, about a write long since written through Connect:
        // a switch and a fence for nothing.
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.connect.answer = new java.util.concurrent.CompletableFuture<>();
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.connect.writeChecks().size() == 1, 4_000, "rule 5 asks the worker's producer");
            h.sidecar.answering = FakeSidecar.Answering.UNAVAILABLE;
            Harness.await(() -> h.router.path() != Router.Path.SIDECAR, 2_000, "the sidecar left");
            h.connect.answer.complete(true);
            h.connect.answer = null;
            h.awaitNewestLanded(4_000);
            h.sidecar.writeAtOnce = true;
            h.sidecar.answering = FakeSidecar.Answering.OK;
            h.awaitPath(Router.Path.SIDECAR, 4_000);
            Thread.sleep(500);
            assertEquals(Router.Path.SIDECAR, h.router.path(), "left again on the old question's answer");
            assertEquals(3, h.metrics.switchesTotal(), "to the sidecar, away, back");
        }
    }
}
