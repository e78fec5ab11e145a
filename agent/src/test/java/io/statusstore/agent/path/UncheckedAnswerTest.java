package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A sidecar whose answers cannot be checked is left (PROTOCOL.md, rule 1): 200 of another shape, JSON nested too
 * deep, an item naming a seq never sent or a key not its seq's, an answer trickled a byte at a time (each byte
 * within the read timeout). Each wedged the agent before (the batch stayed "sending", nothing went to Connect's
 * path, a stack trace a second, or the sender's one thread held for as long as the sidecar liked): now the
 * statuses land through Connect's own path after their fence, in a few lines.
 */
class UncheckedAnswerTest {
    @ParameterizedTest
    @EnumSource(value = FakeSidecar.Answering.class, names = {"WRONG_SHAPE", "DEEP", "UNKNOWN_SEQ", "WRONG_KEY"})
    void aSidecarWhoseAnswerCannotBeCheckedIsLeftForGood(FakeSidecar.Answering fault) throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("c", 0, "RUNNING");
            h.awaitNewestLanded(2_000);
            int before = log.lines().size();
            h.sidecar.answering = fault;
            leftWithConnectWritingTheNewest(h, log, before);
        }
    }

    /**
     * The probe's empty request answered with what cannot be checked: that instance gets no statuses, not at this
     * probe nor at a later one where it answers well (rule 1), as on an answer to a request with statuses. It was
     * handed the statuses at the next probe before (the probe did not distrust it).
     */
    @ParameterizedTest
    @EnumSource(value = FakeSidecar.Answering.class, names = {"WRONG_SHAPE", "DEEP"})
    void anInstanceWhoseProbeAnswerCannotBeCheckedGetsNoStatusesThoughItAnswersWellLater(FakeSidecar.Answering fault)
            throws Exception {
        AgentLines log = new AgentLines();
        Harness h = new Harness();
        h.sidecar.answering = fault;
        try {
            h.start("");
            Harness.await(() -> h.sidecar.statusRequests() >= 1, 2_000, "the probe's empty request");
            h.sidecar.answering = FakeSidecar.Answering.OK;
            int probed = h.sidecar.statusRequests();
            // The probe interval is 50 ms: a dozen probes, any of which would hand over to this instance.
            Thread.sleep(600);
            assertEquals(probed, h.sidecar.statusRequests(), "no request goes to the instance again");
            assertEquals(Router.Path.CONNECT, h.router.path());
            h.write("c", 0, "RUNNING");
            h.awaitNewestLanded(2_000);
            assertTrue(h.sidecarWrites().isEmpty(), "written through Connect: " + h.topic.records());
            assertFalse(log.lines().stream().anyMatch(l -> l.contains("handing the worker's statuses")),
                    log.lines().toString());
            assertTrue(log.lines().stream().anyMatch(l -> l.contains("answered what the agent cannot believe")),
                    "the probe says why: " + log.lines());
            // Restarted, a new instance is believed again.
            h.sidecar.stop();
            h.sidecar.start();
            h.awaitPath(Router.Path.SIDECAR, 3_000);
        } finally {
            h.close();
        }
    }

    /**
     * Rule 5 leaves a sidecar cut off from Kafka with one more request, the one that ends the lease; its answer cannot
     * be checked (an outcome of a seq never sent). That instance gets no statuses again (rule 1, whichever request it
     * answered so), though it reads its topics again (GET /ready) and answers the probe well. Before, the request that
     * ends the lease swallowed the failure without distrusting the instance, and the next probe handed over to it.
     */
    @Test
    void anInstanceWhoseAnswerToTheRequestEndingTheLeaseCannotBeCheckedGetsNoStatusesAgain() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness()) {
            h.onSidecarWithWriteBound(1_000);
            // The sidecar says the write's attempt timed out: rule 5 asks the worker's producer, which can write.
            java.util.concurrent.CompletableFuture<Boolean> producerWrote = h.rule5Asks("c", 0, "PAUSED");
            int before = h.sidecar.posts().size();
            h.sidecar.answering = FakeSidecar.Answering.UNKNOWN_SEQ;
            producerWrote.complete(true);
            Harness.await(() -> h.router.path() != Router.Path.SIDECAR, 2_000, "the sidecar left");
            h.sidecar.answering = FakeSidecar.Answering.OK;
            List<java.util.Map<?, ?>> posts = h.sidecar.posts();
            assertEquals(1L, posts.get(before).get("lease_ms"), "the unchecked answer was the one to the request that "
                    + "ends the lease: " + posts.subList(before, posts.size()));
            // The key goes through Connect at its fence; then the agent probes every 50 ms, the sidecar ready again.
            h.awaitNewestLanded(5_000);
            h.assertAskedNothingAgain("no request goes to the instance again");
            assertFalse(log.lines().stream().anyMatch(l -> l.contains("back on the sidecar")), log.lines().toString());
            h.write("c", 0, "RUNNING");
            h.awaitNewestLanded(2_000);
            assertTrue(h.sidecarWrites().isEmpty(), "written through Connect: " + h.topic.records());
            h.assertInvariants();
        }
    }

    @Test
    void aSidecarThatTricklesItsAnswerIsLeftAtTheRequestsDeadline() throws Exception {
        AgentLines log = new AgentLines();
        Harness h = new Harness();
        h.sidecar.start();
        try (TrickleProxy proxy = new TrickleProxy(h.sidecar.port())) {
            h.url = proxy.url();
            h.start("");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("c", 0, "RUNNING");
            h.awaitNewestLanded(2_000);
            int before = log.lines().size();
            // A byte each 100 ms, within the read timeout (150 ms); the request's deadline is 350 ms.
            proxy.trickling = true;
            leftWithConnectWritingTheNewest(h, log, before);
        } finally {
            h.close();
        }
    }

    private static void leftWithConnectWritingTheNewest(Harness h, AgentLines log, int before) throws Exception {
        h.write("c", 0, "PAUSED");
        h.write("d", 0, "RUNNING");
        // The fence: the lease (400 ms), the sidecar's write bound (0 here) and a margin of 1 s after the request.
        h.awaitNewestLanded(6_000);
        h.assertInvariants();
        Harness.await(() -> h.router.path() == Router.Path.CONNECT, 2_000, "on Connect's own path");
        Thread.sleep(500);
        List<String> all = log.lines();
        List<String> lines = all.subList(before, all.size());
        assertTrue(lines.size() <= 3, "a few lines, not a stream: " + lines);
        assertTrue(log.allLines() < 20, "no stack traces: " + log.allLines() + " lines");
        assertTrue(lines.get(0).contains("falling back to Connect's own status path"), lines.toString());
        assertFalse(lines.stream().anyMatch(l -> l.contains("back on the sidecar")),
                "a sidecar that cannot be believed, or answers this way, is not given statuses again: " + lines);
        assertEquals(2, h.metrics.switchesTotal(), "to the sidecar, then away from it for good");
    }
}
