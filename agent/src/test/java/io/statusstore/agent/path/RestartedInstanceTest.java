package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A request answered 409 (another instance: the sidecar restarted) hands the statuses to the instance {@code GET /}
 * then names only as the probe would hand them over (PROTOCOL.md): an instance the agent believes (rule 1), whose
 * {@code GET /ready} answers 200.
 */
class RestartedInstanceTest {
    /**
     * Two instances behind one URL: the first answered the probe's request with what cannot be checked (rule 1), the
     * agent came to the second; then the first answers again, 409 to a request named for the second, and {@code GET /}
     * names it. It gets no statuses: the write goes through Connect. Before, the 409's path took the instance
     * {@code GET /} named without asking whether it was the one distrusted, and handed it the write.
     */
    @Test
    void aDistrustedInstanceThatAnswersARequestMeantForAnotherGetsNoStatuses() throws Exception {
        AgentLines log = new AgentLines();
        onTheSecondAfterTheFirstWasCaught((h, second, proxy) -> {
            proxy.to(h.sidecar.port());
            int taken = h.sidecar.posts().size();
            h.write("c", 0, "RUNNING");
            h.awaitNewestLanded(3_000);
            Thread.sleep(300);
            assertEquals(taken, h.sidecar.posts().size(), "the distrusted instance took no request");
            assertTrue(h.sidecarWrites().isEmpty(), "written through Connect: " + h.topic.records());
            assertEquals(Router.Path.CONNECT, h.router.path());
            assertTrue(log.lines().stream().noneMatch(l -> l.contains(" restarted (instance")), log.lines().toString());
            h.assertInvariants();
        });
    }

    /**
     * Two instances behind one URL, each of which answers once what cannot be checked: the first the probe's request,
     * the second a request with a status after the agent came to it. Then the first answers again, well: it gets no
     * statuses, as the second gets none. Before, the agent remembered only the instance it distrusted last, and its
     * next probe handed the first one the statuses.
     */
    @Test
    void everyInstanceThatAnsweredWhatCannotBeBelievedGetsNoStatusesNotOnlyTheLast() throws Exception {
        AgentLines log = new AgentLines();
        onTheSecondAfterTheFirstWasCaught((h, second, proxy) -> {
            second.answering = FakeSidecar.Answering.WRONG_SHAPE;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.router.path() != Router.Path.SIDECAR, 2_000, "the agent left the second instance");
            proxy.to(h.sidecar.port());
            // c-0 goes through Connect after its fence; then the agent probes every 50 ms.
            h.awaitNewestLanded(6_000);
            // A dozen probes, any of which would hand over to the first instance.
            h.assertAskedNothingAgain("the first instance is asked to take nothing again");
            h.write("c", 0, "PAUSED");
            h.awaitNewestLanded(2_000);
            List<Topic.Record> records = h.topic.records();
            assertEquals("connect", records.get(records.size() - 1).via, records.toString());
            assertTrue(log.lines().stream().noneMatch(l -> l.contains("back on the sidecar")), log.lines().toString());
            h.assertInvariants();
        });
    }

    /**
     * The sidecar restarts, and its new instance has not read its topics to their end yet ({@code GET /ready} answers
     * 503: a putSafe would be judged against a cache that lacks another worker's newer status). The agent hands it
     * nothing until it is ready; the write goes through Connect. Before, the 409's path handed the new instance the
     * write without asking {@code GET /ready}, and it wrote it.
     */
    @Test
    void aRestartedInstanceNotYetReadyGetsNoStatusesUntilItIs() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("c", 0, "RUNNING");
            h.awaitNewestLanded(2_000);
            h.sidecar.stop();
            h.sidecar.ready = false;
            h.sidecar.start();
            h.write("c", 0, "PAUSED");
            h.awaitNewestLanded(3_000);
            assertEquals(1, h.sidecarWrites().size(), "PAUSED written through Connect: " + h.topic.records());
            Thread.sleep(300);
            assertEquals(Router.Path.CONNECT, h.router.path());
            h.sidecar.ready = true;
            h.awaitPath(Router.Path.SIDECAR, 5_000);
            h.write("c", 0, "RUNNING");
            h.awaitNewestLanded(2_000);
            assertEquals(2, h.sidecarWrites().size(), "written by the instance once ready: " + h.topic.records());
            h.assertInvariants();
        }
    }

    /**
     * An instance says it wrote a status it never wrote (rule 4), and the sidecar restarts before the read-back bound
     * passes: the agent goes on with the new instance (409, GET /). When the bound passes, the instance caught is the
     * one that said "written": the agent leaves (the status goes through Connect after its fence) and comes back to
     * the new one, which said nothing untrue. Before, the check marked the instance current then, the new one, and
     * the worker stayed on Connect's own path for as long as that instance ran.
     */
    @Test
    void aWriteTheOldInstanceSaidWrittenAndNeverWroteDistrustsTheOldInstanceNotTheNewOne() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.lying = true;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.router.nextVerifyDeadline() > 0, 2_000, "the sidecar's word that it wrote c-0");
            h.sidecar.stop();
            h.sidecar.lying = false;
            h.sidecar.start();
            h.write("d", 0, "RUNNING");
            Harness.await(() -> said(log, " restarted (instance"), 2_000,
                    "the agent goes on with the new instance");
            // The read-back bound (the write bound, 0 here, and 1 s) passes: c-0 goes through Connect after its fence.
            h.awaitNewestLanded(6_000);
            assertTrue(log.lines().stream().anyMatch(l -> l.contains("has not read it back")), log.lines().toString());
            h.awaitPath(Router.Path.SIDECAR, 5_000);
            h.write("c", 0, "PAUSED");
            h.awaitNewestLanded(2_000);
            assertEquals("sidecar", h.topic.records().get(h.topic.records().size() - 1).via, h.topic.records().toString());
            h.assertInvariants();
        }
    }

    /**
     * Rule 5's question to the worker's producer is out about a write overdue at an instance that then restarts: the
     * agent goes on with the new instance (409, GET /), which holds no write of the session yet. The producer then
     * answers that it writes: that is evidence against the old instance, not the new one, and the agent stays. Before,
     * the answer, judged on the new instance, made the agent leave it ("has given no outcome ... while the worker's own
     * producer wrote"), ending its lease.
     */
    @Test
    void rule5sQuestionAboutTheOldInstanceDoesNotMakeTheAgentLeaveTheNewOne() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness()) {
            h.onSidecarWithWriteBound(1_000);
            // The old instance says the write's attempt timed out: rule 5 asks the worker's producer.
            java.util.concurrent.CompletableFuture<Boolean> producerWrote = h.rule5Asks("c", 0, "PAUSED");
            h.sidecar.stop();
            h.sidecar.writeAtOnce = true;
            h.sidecar.timedOut = false;
            h.sidecar.start();
            Harness.await(() -> said(log, " restarted (instance"), 2_000, "the agent goes on with the new instance");
            int requests = h.sidecar.posts().size();
            producerWrote.complete(true);
            Thread.sleep(300);
            assertEquals(Router.Path.SIDECAR, h.router.path(), log.lines().toString());
            assertTrue(!said(log, "falling back"), log.lines().toString());
            assertTrue(h.sidecar.posts().subList(requests, h.sidecar.posts().size()).stream()
                    .noneMatch(p -> Long.valueOf(1).equals(p.get("lease_ms"))), "no request ended the lease");
            // c-0 goes to the new instance once the old one's lease and write bound have passed.
            h.awaitNewestLanded(5_000);
            assertEquals("sidecar", h.topic.records().get(h.topic.records().size() - 1).via, h.topic.records().toString());
            h.assertInvariants();
        }
    }

    /** A case run with two instances behind one URL, the agent on the second. */
    private interface TwoInstancesCase {
        void run(Harness h, FakeSidecar second, TrickleProxy proxy) throws Exception;
    }

    /**
     * Runs {@code test} with two instances behind one URL (the proxy): the first answered the probe's request with what
     * cannot be checked (rule 1), and the agent came to the second; then stops both.
     */
    private static void onTheSecondAfterTheFirstWasCaught(TwoInstancesCase test) throws Exception {
        Harness h = new Harness();
        FakeSidecar second = new FakeSidecar(h.topic).start();
        h.sidecar.start();
        try (TrickleProxy proxy = new TrickleProxy(h.sidecar.port())) {
            h.url = proxy.url();
            h.sidecar.answering = FakeSidecar.Answering.WRONG_SHAPE;
            h.start("");
            Harness.await(() -> h.sidecar.statusRequests() >= 1, 2_000, "the probe's empty request");
            h.sidecar.answering = FakeSidecar.Answering.OK;
            proxy.to(second.port());
            h.awaitPath(Router.Path.SIDECAR, 3_000);
            test.run(h, second, proxy);
        } finally {
            h.close();
            second.stop();
        }
    }

    private static boolean said(AgentLines log, String text) {
        try {
            return log.lines().stream().anyMatch(l -> l.contains(text));
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
