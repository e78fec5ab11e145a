package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;

import java.util.concurrent.CompletableFuture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Rule 5 when Kafka comes back for everyone: the worker's own producer writes again as the sidecar writes what it held,
 * but the sidecar's outcomes come only on its next answer. Before, the worker's write alone left the sidecar at once:
 * its keys waited out their fence and went through Connect (the fault matrix's kafka-away-30s row: the pod right 7.5 s
 * after the broker was back, a stock worker 3.1 s; the agents' lines "falling back ... while the worker's own producer
 * wrote", 0.6 s after the worker found its coordinator again).
 */
class OverdueCheckTest {
    @Test
    void whenKafkaComesBackForEveryoneTheSidecarThatWritesWhatItHeldIsNotLeft() throws Exception {
        try (Harness h = new Harness().start("")) {
            pausedWithKafkaAwayForEveryone(h);
            // Asked again: this time the worker's producer holds its write until Kafka comes back.
            CompletableFuture<Boolean> back = new CompletableFuture<>();
            h.connect.answer = back;
            Harness.await(() -> h.connect.writeChecks().size() == 2, 8_000, "rule 5's second question");
            // Kafka back for everyone at once: the sidecar writes what it held, the worker's producer writes its probe.
            h.sidecar.writeAtOnce = true;
            assertEquals(1, h.sidecar.release());
            back.complete(true);
            // The sidecar's outcome comes on the agent's next poll: the write is settled there, and the agent stays.
            Harness.await(() -> !h.router.hasPending(), 4_000, "the sidecar's outcome");
            assertEquals(Router.Path.SIDECAR, h.router.path());
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            assertTrue(h.connectWrites().isEmpty(), "nothing went through Connect: " + h.topic.records());
        }
    }

    @Test
    void whenOnlyTheWorkersProducerCanWriteAfterKafkaWasAwayTheSidecarIsLeftAfterTheAnswerBound() throws Exception {
        try (Harness h = new Harness().start("")) {
            pausedWithKafkaAwayForEveryone(h);
            // Kafka back for the worker only: the sidecar still holds the write, and is left; Connect writes it.
            h.connect.canWrite = true;
            h.awaitNewestLanded(15_000);
            h.assertInvariants();
            assertEquals(1, h.connectWrites().size(), "the worker's own producer wrote it: " + h.topic.records());
        }
    }

    /** Kafka away for everyone: the sidecar holds c-0's PAUSED, the worker's own producer cannot write either, and
     * rule 5 has asked once. */
    private static void pausedWithKafkaAwayForEveryone(Harness h) {
        h.awaitPath(Router.Path.SIDECAR, 2_000);
        h.sidecar.writeAtOnce = false;
        h.connect.canWrite = false;
        h.write("c", 0, "PAUSED");
        Harness.await(() -> h.connect.writeChecks().size() == 1, 8_000, "rule 5's first question");
    }
}
