package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The agent's own faults move the worker to Connect's path at once, through the fence, in one line (rule 7): a
 * step of the sender that throws, and the sender's thread that ends.
 */
class SenderFaultTest {
    @Test
    void aStepThatThrowsHandsTheWaitingWritesToConnect() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness()) {
            h.sidecar.clusterId = "not-yet";
            h.start("");
            // On Connect's own path, whose producer keeps re-sending d-0 (an outage): coming back waits for it.
            h.connect.holding = true;
            assertFalse(h.write("d", 0, "RUNNING"));
            h.sidecar.clusterId = "cluster-1";
            h.awaitPath(Router.Path.QUIESCING, 2_000);
            assertTrue(h.write("c", 0, "RUNNING"), "while quiescing, writes wait in the table");
            // Then the check of Connect's own path throws, every time.
            h.connect.quietFails = new StackOverflowError();
            Harness.await(() -> h.connect.agentWrites().size() == 1, 2_000, "c-0 handed to Connect's own path");
            h.connect.release();
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            Thread.sleep(1_500);
            List<String> lines = log.lines();
            assertTrue(lines.stream().filter(l -> l.contains("a step of the agent's sender failed")).count() <= 2,
                    "one line a minute, not a stream: " + lines);
            assertTrue(log.allLines() < 200, "one stack trace, not one a second: " + log.allLines() + " lines");
        }
    }

    @Test
    void aSenderThreadThatEndsHandsEveryKeyToConnectThroughTheFence() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "c-0 pending at the sidecar");
            h.write("c", 0, "PAUSED");
            h.interruptSender();
            h.awaitNewestLanded(4_000);
            h.assertInvariants();
            Topic.Record c0 = h.connectWrites().get(0);
            assertTrue(c0.at > h.sidecar.leaseEndBefore(c0.at),
                    "through Connect only once the lease ended (the sidecar's write bound is 0 here)");
            Harness.await(() -> !h.senderAlive(), 2_000, "the sender's thread ended");
            assertEquals(Router.Path.CONNECT, h.router.path());
            assertFalse(h.write("d", 0, "RUNNING"), "from then on every write runs Connect's own method");
            assertEquals(0, h.sidecar.release(), "the sidecar's lease ended: it writes nothing more");
            h.router.requestStop();
            assertEquals(0, h.router.awaitStopped(1_000, 0), "stop waits for no sender that is gone");
        }
    }
}
