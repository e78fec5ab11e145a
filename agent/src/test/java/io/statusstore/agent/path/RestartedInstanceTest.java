package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;

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
        } finally {
            h.close();
            second.stop();
        }
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
}
