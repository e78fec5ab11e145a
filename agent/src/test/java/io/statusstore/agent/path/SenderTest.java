package io.statusstore.agent.path;

import io.statusstore.agent.AgentOptions;
import io.statusstore.agent.sidecar.SidecarClient;
import io.statusstore.agent.sidecar.Token;
import io.statusstore.agent.status.StatusUpdate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The sender between a sidecar that answers, refuses, is late, wrong or restarted, and Connect's own path. */
class SenderTest {
    private static long updatesSent(Harness h) {
        return h.sidecar.posts().stream().mapToLong(p -> ((java.util.List<?>) p.get("updates")).size()).sum();
    }

    @Test
    void handsOverInOrderAndSettlesOnOutcomes() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            for (int i = 0; i < 20; i++) {
                assertTrue(h.write("c", i % 5, i % 2 == 0 ? "RUNNING" : "PAUSED"));
            }
            h.awaitNewestLanded(2_000);
            Harness.await(() -> h.router.size() == 0, 2_000, "table empty once outcomes came");
            h.assertInvariants();
            assertTrue(h.connectWrites().isEmpty());
            assertEquals(1, h.metrics.switchesTotal());
            assertTrue(h.metrics.successTotal() >= 5);
            assertEquals(h.metrics.handedOverTotal(), h.metrics.successTotal());
        }
    }

    /** Whether a request carried a write of this key. */
    private static boolean carried(Map<?, ?> post, String connector, int task) {
        for (Object o : (List<?>) post.get("updates")) {
            Map<?, ?> u = (Map<?, ?>) o;
            if (connector.equals(u.get("connector")) && Long.valueOf(task).equals(u.get("task"))) {
                return true;
            }
        }
        return false;
    }

    /**
     * c-{@code first} written and its request at the sidecar (Kafka slow: its answer waits), then c-{@code first + 1},
     * until a request carried it.
     */
    private static void writeWhileAnAnswerWaits(Harness h, int first) {
        h.write("c", first, "RUNNING");
        Harness.await(() -> h.sidecar.posts().stream().anyMatch(p -> carried(p, "c", first)), 2_000,
                "c-" + first + "'s request at the sidecar, its answer waiting for Kafka");
        h.write("c", first + 1, "RUNNING");
        Harness.await(() -> h.sidecar.posts().stream().anyMatch(p -> carried(p, "c", first + 1)), 2_000,
                "c-" + (first + 1) + " sent");
    }

    @Test
    void aWriteTakenWhileAnAnswerWaitsForKafkaWakesThatAnswer() throws Exception {
        // bench.connect_outage: a resume's slowest statuses reached the sidecar's producer 8-10 ms behind the stock
        // worker's. A task's status taken a moment after its connector's, once the connector's request had gone, waited
        // for that request's answer, which waits until Kafka acknowledged it: a round trip to Kafka more than the stock
        // worker's record. Now the agent wakes that answer, and the write goes in the next request. Kafka is slow
        // here (writes wait for release): unwoken, the answer would wait out its whole wait.
        // A wake that comes after the answer's wait ran out (a starved machine: the wait is 250 ms) wakes nothing:
        // up to three rounds, each with a wake naming the write it holds.
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            for (int round = 0; round < 3 && h.sidecar.wokenAnswers() == 0; round++) {
                int first = 2 * round;
                writeWhileAnAnswerWaits(h, first);
                long held = h.sidecar.posts().stream().filter(p -> carried(p, "c", first + 1))
                        .flatMap(p -> ((List<?>) p.get("updates")).stream())
                        .map(u -> (Long) ((Map<?, ?>) u).get("seq")).max(Long::compare).get();
                Harness.await(() -> h.sidecar.wakes().stream().anyMatch(w -> Long.valueOf(held).equals(w.get("seq"))),
                        2_000, "a wake naming c-" + (first + 1) + "'s write, the one it holds");
                h.sidecar.release();
            }
            assertTrue(h.sidecar.wokenAnswers() >= 1, "an answer woken");
            h.sidecar.writeAtOnce = true;
            h.sidecar.release();
            h.awaitNewestLanded(5_000);
            Harness.await(() -> h.router.size() == 0, 5_000, "table empty once outcomes came");
            h.assertInvariants();
            assertTrue(h.connectWrites().isEmpty());
        }
    }

    @Test
    void aSidecarThatDoesNotKnowWakesIsNotWokenAgain() throws Exception {
        // A sidecar of a version before wakes answers 404: the agent writes as before, and wakes it no more.
        try (Harness h = new Harness().start("")) {
            h.sidecar.wakes = false;
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            for (int round = 0; round < 2; round++) {
                writeWhileAnAnswerWaits(h, 2 * round);
                h.sidecar.release();
            }
            assertEquals(1, h.sidecar.notFound(), "one wake answered 404, none after");
            h.sidecar.writeAtOnce = true;
            h.awaitNewestLanded(5_000);
            h.assertInvariants();
            assertTrue(h.connectWrites().isEmpty());
        }
    }

    @Test
    void aFreshStoresFirstWriteWaitsForTheFirstExchangeAndGoesToTheSidecar() throws Exception {
        // A fresh KafkaStatusBackingStore with the agent wrote 31 statuses and its sidecar 30: the first one, offered
        // before the agent's first exchange, took Connect's own path.
        try (Harness h = new Harness().start("")) {
            assertTrue(h.write("c", 0, "RUNNING"), "the first write waits for the first exchange");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            assertTrue(h.connectWrites().isEmpty(), "nothing through Connect's own path: " + h.topic.records());
        }
    }

    /**
     * A fresh store's first writes wait for the agent's first exchange one request deadline at most (1,150 ms here):
     * GET /, GET /ready and the empty request each answered within their own deadline (700 ms each), but together
     * later than that. Before, the first exchange went on past the bound (each call had a whole deadline of its own)
     * and handed the writes that waited to the sidecar 2.1 s after the start.
     */
    @Test
    void aFreshStoresFirstWritesWaitOneRequestDeadlineAtMostForASlowFirstExchange() throws Exception {
        Harness h = new Harness();
        h.sidecar.getLateMs = 700;
        h.sidecar.lateMs = 700;
        h.sidecar.answering = FakeSidecar.Answering.LATE;
        h.sidecar.start();
        try {
            long started = FakeSidecar.now();
            h.start("read.timeout.ms=1000,lease.ms=2000");
            assertTrue(h.write("c", 0, "RUNNING"), "the first write waits for the first exchange");
            h.awaitNewestLanded(5_000);
            Topic.Record first = h.topic.records().get(0);
            assertEquals("connect", first.via, "not handed over within the bound: " + h.topic.records());
            // Its bound (1,150 ms) with room for a loaded machine; the exchange alone took three answers of 700 ms.
            assertTrue(first.at - started < 1_150 + 800, "the first write waited " + (first.at - started) + " ms");
        } finally {
            h.close();
        }
    }

    @Test
    void aFreshStoresFirstWritesTakeConnectsPathWhenNoSidecarAnswers() throws Exception {
        try (Harness h = new Harness()) {
            try (java.net.ServerSocket closed = new java.net.ServerSocket(0)) {
                h.url = "http://127.0.0.1:" + closed.getLocalPort();
            }
            h.start("");
            h.write("c", 0, "RUNNING");
            h.awaitPath(Router.Path.CONNECT, 2_000);
            h.awaitNewestLanded(2_000);
            assertFalse(h.write("c", 0, "PAUSED"), "on Connect's own path, the original runs in the worker's thread");
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            assertTrue(h.sidecarWrites().isEmpty());
        }
    }

    /**
     * Starts the agent on Connect's own path (the sidecar's cluster not the worker's yet), where Connect's producer
     * keeps re-sending c-0's v1 (an outage); then the sidecar matches, and the agent waits for Connect's path to go quiet.
     */
    private static void quiescingBehindConnectsResend(Harness h) throws Exception {
        h.sidecar.clusterId = "not-yet";
        h.start("");
        h.awaitPath(Router.Path.CONNECT, 2_000);
        h.connect.holding = true;
        assertFalse(h.write("c", 0, "RUNNING"));
        h.sidecar.clusterId = "cluster-1";
        h.awaitPath(Router.Path.QUIESCING, 2_000);
    }

    @Test
    void waitsForConnectsOwnPathToGoQuietBeforeHandingOver() throws Exception {
        try (Harness h = new Harness()) {
            quiescingBehindConnectsResend(h);
            assertTrue(h.write("c", 0, "PAUSED"), "while quiescing, writes wait in the table");
            Thread.sleep(300);
            assertEquals(Router.Path.QUIESCING, h.router.path());
            assertEquals(0, updatesSent(h), "nothing handed over while Connect's re-send may still land");
            h.connect.release();
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            assertEquals("connect", h.topic.records().get(0).via);
            assertEquals("sidecar", h.topic.records().get(1).via);
        }
    }

    /**
     * New writes go only in a request to a sidecar that answered within the last 250 ms (rule 3), on arriving at the
     * sidecar too: Connect's own path took a while to go quiet after the probe was answered, and the sidecar hung
     * meanwhile. An empty request goes first; unanswered, the writes that waited in the table have nothing at the
     * sidecar and go through Connect at once. Before, the agent counted its arrival as an answer and sent them in a
     * request that went unanswered, so their keys waited out the fence (the lease and a second after that request).
     */
    @Test
    void writesThatWaitedForConnectsPathToGoQuietGoOnlyToASidecarThatAnsweredJustBefore() throws Exception {
        try (Harness h = new Harness()) {
            quiescingBehindConnectsResend(h);
            int probed = h.sidecar.statusRequests();
            // The sidecar hangs while Connect's path is not quiet: it answers no request within its deadline (300 ms).
            h.sidecar.lateMs = 1_500;
            h.sidecar.answering = FakeSidecar.Answering.LATE;
            assertTrue(h.write("c", 0, "PAUSED"), "while quiescing, writes wait in the table");
            assertTrue(h.write("d", 0, "RUNNING"));
            Thread.sleep(400);
            long released = FakeSidecar.now();
            h.connect.release();
            Harness.await(() -> h.topic.latest().containsKey("status-task-d-0"), 3_000, "d-0 through Connect");
            h.awaitNewestLanded(3_000);
            long written = h.connectWrites().get(h.connectWrites().size() - 1).at;
            // The empty request's deadline (300 ms), not the fence of a request that carried them (400 ms + 1 s).
            assertTrue(written - released < 1_000, "the writes waited " + (written - released) + " ms for Connect's "
                    + "path: " + h.topic.records());
            Thread.sleep(h.sidecar.lateMs);
            List<Map<?, ?>> posts = h.sidecar.posts();
            assertTrue(posts.size() > probed, "the empty request reached the hung sidecar: " + posts);
            for (Map<?, ?> post : posts.subList(probed, posts.size())) {
                assertTrue(((List<?>) post.get("updates")).isEmpty(), "a write went to a sidecar that had not answered "
                        + "for " + "over 250 ms: " + post);
            }
            assertTrue(h.sidecarWrites().isEmpty(), h.topic.records().toString());
        }
    }

    /**
     * A request refused at connect never reached the sidecar and renewed no lease: a key with a write there waits for
     * the fence of the last request that may have reached it (rule 3), not of the refused one. Here the worker's store
     * has not read back c-0, which the sidecar said it wrote (its consumer lags), and the agent was idle 600 ms when the
     * sidecar died. Before, the refused request's fence stood (the sender's reset of it did nothing), and c-0 waited
     * those 600 ms more.
     */
    @Test
    void aRequestRefusedAtConnectDoesNotPushBackTheFenceOfTheKeysAtTheSidecar() throws Exception {
        Harness h = new Harness();
        // A write bound of 3 s: the read-back bound (rule 4) is 4 s, so the test waits 2.5 s while c-0 only waits to be
        // read back, then the sidecar goes; a refused request that pushed the fence back would put it 2.5 s late.
        h.sidecar.writeBoundMs = 3_000;
        try {
            h.start("");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            // The worker's store reads nothing more for now: what the sidecar says it wrote is not read back.
            h.topic.reader((key, value) -> { });
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.sidecarWrites().size() == 1 && h.sidecar.posts().size() >= 2, 2_000,
                    "c-0 written by the sidecar");
            Thread.sleep(2_500);
            // The last request that reached it.
            long fence = h.sidecar.leaseEnd() + h.sidecar.writeBoundMs + Sender.FENCE_MARGIN_MS;
            h.sidecar.stop();
            h.write("d", 0, "RUNNING");
            Harness.await(() -> h.connectWrites().stream().anyMatch(r -> r.key.equals("status-task-c-0")), 10_000,
                    "c-0 through Connect");
            long written = h.connectWrites().stream().filter(r -> r.key.equals("status-task-c-0")).findFirst().get().at;
            // Pushed back by a request that never reached the sidecar, it went 2.5 s late at the least.
            assertTrue(written < fence + 1_500, "c-0 went through Connect " + (written - fence) + " ms after the fence "
                    + "of the last request that reached the sidecar: " + h.topic.records());
            h.awaitNewestLanded(1_000);
        } finally {
            h.close();
        }
    }

    @Test
    void aWriteTheSidecarMadeIsSettledOnItsOwnAnswerSoItsKeyIsNotFencedWhenTheSidecarDies() throws Exception {
        // The sidecar writes c-0 at once, as Kafka acknowledges a write within moments, but the outcome of a write
        // comes on a later answer unless the request waits for it. Polls a minute apart and a two-minute lease: had
        // the agent waited for the next poll to hear it, c-0's newest write would wait out the fence (the lease, the
        // write bound and a second) once the sidecar died, though nothing of it could land any more.
        try (Harness h = new Harness().start("poll.interval.ms=60000,lease.ms=120000")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.router.size() == 0, 5_000, "c-0 settled: its outcome heard and read back");
            assertEquals(1, h.sidecarWrites().size());
            h.sidecar.stop();
            h.write("c", 0, "PAUSED");
            Harness.await(() -> h.connectWrites().size() == 1, 5_000, "c-0 through Connect once the sidecar died");
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            // The sender leaves FENCING in its step after the hand-over, moments after the write landed.
            h.awaitPath(Router.Path.CONNECT, 2_000);
        }
    }

    @Test
    void aSidecarKnownAwayIsLeftAtOnceKeyByKey() throws Exception {
        // A key with nothing at the sidecar takes Connect's path as soon as the sidecar is known away (here a 503);
        // a key with a write there waits until nothing the sidecar took of it can land (rule 3).
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "c-0 pending at the sidecar");
            h.sidecar.answering = FakeSidecar.Answering.UNAVAILABLE;
            h.write("c", 0, "PAUSED");
            h.write("d", 0, "RUNNING");
            Harness.await(() -> h.topic.latest().containsKey("status-task-d-0"), 2_000, "d-0 through Connect");
            long dAt = h.connectWrites().get(0).at;
            assertTrue(dAt < h.sidecar.leaseEnd(), "d-0, never at the sidecar, went before the lease even ended");
            assertFalse(h.topic.latest().containsKey("status-task-c-0"), "c-0 waits for its fence");
            h.awaitNewestLanded(4_000);
            h.assertInvariants();
            Topic.Record c0 = h.connectWrites().get(1);
            assertEquals("status-task-c-0", c0.key);
            assertTrue(c0.at > h.sidecar.leaseEndBefore(c0.at),
                    "c-0 through Connect only once the lease ended");
            assertEquals(0, h.sidecar.release(), "the sidecar's lease ended: it writes nothing more");
            h.sidecar.answering = FakeSidecar.Answering.OK;
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            assertTrue(h.write("c", 0, "RUNNING"));
            h.sidecar.writeAtOnce = true;
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            assertEquals(3, h.metrics.switchesTotal(), "to the sidecar, away at once, back");
        }
    }

    @Test
    void aWriteTheSidecarSaysExpiredIsSentAgain() throws Exception {
        // The sidecar stopped past the lease (the brokers away too) settles the session's writes "expired" when it
        // runs again: not written. Taken as done, they were lost (16 of 21 keys kept their older status).
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "RUNNING");
            h.write("c", 1, "RUNNING");
            Harness.await(() -> h.sidecar.pendingCount() == 2, 2_000, "pending at the sidecar");
            h.sidecar.writeAtOnce = true;
            assertEquals(2, h.sidecar.expire());
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            assertTrue(h.connectWrites().isEmpty(), "sent again to the sidecar, which is up");
            Harness.await(() -> h.router.size() == 0, 2_000, "settled once written");
        }
    }

    @Test
    void aRestartedSidecarGetsWhatWasPendingAgainOnceTheOldOneCannotWriteIt() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            for (int i = 0; i < 3; i++) {
                h.write("c", i, "RUNNING");
            }
            Harness.await(() -> h.sidecar.pendingCount() == 3, 2_000, "three pending at the sidecar");
            String before = h.sidecar.instance();
            // Between two polls a new instance answers; the old one, terminating, still holds what it took.
            h.sidecar.writeAtOnce = true;
            h.sidecar.replaceKeepingOld();
            assertFalse(before.equals(h.sidecar.instance()));
            h.awaitNewestLanded(4_000);
            h.assertInvariants();
            assertTrue(h.connectWrites().isEmpty());
            assertTrue(h.sidecarWrites().get(0).at >= h.sidecar.oldLeaseEnd(),
                    "sent to the new instance only once the old one's lease ended");
            assertEquals(Router.Path.SIDECAR, h.router.path());
        }
    }

    @Test
    void aReplacedSidecarStillWritingWhatItHeldNeverLandsOverANewerStatus() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "pending at the old instance");
            // A new instance answers; the old one, terminating, still holds c-0 RUNNING and writes it late in its lease.
            h.sidecar.replaceKeepingOld();
            h.sidecar.writeAtOnce = true;
            h.write("c", 0, "PAUSED");
            h.write("d", 0, "RUNNING");
            Harness.await(() -> h.topic.latest().containsKey("status-task-d-0"), 2_000, "a key not held goes at once");
            long left = h.sidecar.oldLeaseEnd() - FakeSidecar.now();
            Thread.sleep(Math.max(0, left - 50));
            assertEquals(1, h.sidecar.releaseOld(), "the old instance wrote within its lease");
            h.awaitNewestLanded(3_000);
            h.assertInvariants();
            assertTrue(h.connectWrites().isEmpty());
        }
    }

    @Test
    void aSidecarAwayTooLongIsFencedThenConnectWritesTheNewest() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            // Brokers down behind the sidecar: it takes v1 and v2 but writes nothing yet.
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "RUNNING");
            h.write("c", 1, "RUNNING");
            Harness.await(() -> h.sidecar.pendingCount() == 2, 2_000, "pending at the sidecar");
            // Then it is slow, not dead: it still takes what comes, after the agent stopped waiting.
            h.sidecar.answering = FakeSidecar.Answering.LATE;
            h.write("c", 0, "PAUSED");
            Harness.await(() -> h.metrics.switchesTotal() == 2, 6_000, "the agent left the sidecar");
            h.write("c", 0, "RUNNING");
            // Its brokers come back while the agent waits out the lease: it writes what it holds, in its lease.
            long left = h.sidecar.leaseEnd() - FakeSidecar.now();
            if (left > 50) {
                Thread.sleep(left / 2);
            }
            h.sidecar.release();
            h.sidecar.answering = FakeSidecar.Answering.OK;
            h.awaitPath(Router.Path.SIDECAR, 6_000);
            h.awaitNewestLanded(1_000);
            h.assertInvariants();
            List<Topic.Record> connect = h.connectWrites();
            assertEquals(2, connect.size(), "Connect's own path wrote the two unsettled keys: " + h.topic.records());
            long firstConnectWrite = connect.get(0).at;
            assertTrue(firstConnectWrite > h.sidecar.leaseEndBefore(firstConnectWrite),
                    "Connect's path wrote only after the lease ended");
            assertEquals(3, h.metrics.switchesTotal(), "to the sidecar, back to Connect, to the sidecar again");
        }
    }

    @Test
    void theFenceWaitsOutTheSidecarsWriteBoundToo() throws Exception {
        try (Harness h = new Harness()) {
            // A write the sidecar started just before its lease ended may land this much later (its producer's
            // delivery timeout, which GET / names).
            h.sidecar.writeBoundMs = 1_500;
            h.start("");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "pending at the sidecar");
            h.sidecar.answering = FakeSidecar.Answering.UNAVAILABLE;
            Harness.await(() -> h.metrics.switchesTotal() == 2, 6_000, "the agent left the sidecar");
            Harness.await(() -> !h.connectWrites().isEmpty(), 10_000, "Connect's path wrote the key");
            long firstConnectWrite = h.connectWrites().get(0).at;
            assertTrue(firstConnectWrite >= h.sidecar.leaseEndBefore(firstConnectWrite) + 1_500,
                    "Connect's path wrote only once the lease and the sidecar's write bound had passed");
        }
    }

    @Test
    void aSidecarThatDiesIsLeftAndFoundAgain() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("a", 0, "RUNNING");
            h.awaitNewestLanded(2_000);
            h.sidecar.stop();
            h.write("a", 0, "PAUSED");
            h.write("b", 0, "RUNNING");
            h.awaitPath(Router.Path.CONNECT, 6_000);
            h.awaitNewestLanded(1_000);
            assertFalse(h.write("b", 0, "FAILED"), "on Connect's own path the original runs");
            h.sidecar.start();
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            assertTrue(h.write("b", 0, "RUNNING"));
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
            assertEquals(3, h.metrics.switchesTotal());
            // a0 PAUSED by the fall back; b0 RUNNING too, or directly if the agent had left by the time it came (it
            // leaves at once, so which depends on the timing); b0 FAILED direct.
            long fellBack = h.metrics.fallenBackTotal();
            assertTrue(fellBack >= 1 && fellBack <= 2, fellBack + ": " + h.connectWrites());
            assertEquals(3, h.connectWrites().size(), h.connectWrites().toString());
        }
    }

    @Test
    void aSidecarOfAnotherClusterOrTopicIsNeverGivenAnything() throws Exception {
        for (String wrong : new String[] {"cluster", "topic", "protocol"}) {
            try (Harness h = new Harness()) {
                if (wrong.equals("cluster")) {
                    h.sidecar.clusterId = "cluster-2";
                } else if (wrong.equals("topic")) {
                    h.sidecar.statusTopic = "other-status";
                } else {
                    h.sidecar.protocol = 2;
                }
                h.start("");
                Harness.await(() -> h.sidecar.gets() >= 3, 2_000, "probes");
                assertFalse(h.write("c", 0, "RUNNING"));
                assertEquals(Router.Path.CONNECT, h.router.path());
                assertEquals(0, updatesSent(h));
                h.assertInvariants();
            }
        }
    }

    @Test
    void aSidecarThatRefusesTheTokenIsNeverGivenAnythingAndLeftAtOnce() throws Exception {
        try (Harness h = new Harness()) {
            h.sidecar.token = "right";
            h.token = "wrong";
            h.start("");
            Harness.await(() -> h.sidecar.gets() >= 3, 2_000, "probes");
            assertFalse(h.write("c", 0, "RUNNING"));
            assertEquals(Router.Path.CONNECT, h.router.path());
            assertTrue(h.sidecar.posts().isEmpty());
        }
        try (Harness h = new Harness()) {
            h.sidecar.token = "right";
            h.token = "right";
            h.start("fallback.after.ms=60000");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.token = "rotated";
            h.write("c", 0, "RUNNING");
            h.awaitPath(Router.Path.CONNECT, 2_000);
            h.awaitNewestLanded(1_000);
            h.assertInvariants();
            assertEquals(1, h.connectWrites().size());
        }
    }

    @Test
    void aRotatedTokenFileIsReadAgainWithoutARestart(@TempDir Path dir) throws Exception {
        // token.file was read once, at the worker's start: a token rotated in place (a Kubernetes secret) was refused
        // (401) and the worker stayed on Connect's own path until it restarted.
        Path file = Files.write(dir.resolve("token"), "right\n".getBytes(StandardCharsets.UTF_8));
        Files.setLastModifiedTime(file, FileTime.fromMillis(System.currentTimeMillis() - 60_000));
        try (Harness h = new Harness()) {
            h.sidecar.token = "right";
            h.start("token.file=" + file);
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("c", 0, "RUNNING");
            h.awaitNewestLanded(2_000);
            // The secret rotated: the sidecar takes only the new token, and the file holds it (written a while ago).
            h.sidecar.token = "rotated";
            Files.write(file, "rotated\n".getBytes(StandardCharsets.UTF_8));
            Files.setLastModifiedTime(file, FileTime.fromMillis(System.currentTimeMillis() - 5_000));
            h.write("c", 0, "PAUSED");
            h.awaitNewestLanded(4_000);
            h.awaitPath(Router.Path.SIDECAR, 6_000);
            h.write("d", 0, "RUNNING");
            h.awaitNewestLanded(4_000);
            h.assertInvariants();
            List<Topic.Record> d = h.topic.records().stream().filter(r -> r.key.equals("status-task-d-0"))
                    .collect(Collectors.toList());
            assertEquals(1, d.size(), d.toString());
            assertEquals("sidecar", d.get(0).via, "the sidecar took the new token: " + h.topic.records());
        }
    }

    @Test
    void aFullTableFallsBackWithoutLosingAKey() throws Exception {
        try (Harness h = new Harness().start("max.keys=3")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            for (int i = 0; i < 3; i++) {
                assertTrue(h.write("c", i, "RUNNING"));
            }
            Harness.await(() -> h.sidecar.pendingCount() == 3, 2_000, "three pending at the sidecar");
            assertFalse(h.write("c", 3, "RUNNING"), "a fourth key runs the original at once");
            assertEquals(Router.Path.FENCING, h.router.path());
            assertTrue(h.write("c", 0, "PAUSED"), "a key in the table still coalesces there");
            h.awaitPath(Router.Path.CONNECT, 6_000);
            h.awaitNewestLanded(1_000);
            h.assertInvariants();
            assertEquals(0, h.sidecar.release(), "the sidecar's lease ended: it writes nothing more");
            h.assertInvariants();
        }
    }

    @Test
    void stopWhileTheSidecarIsAwayHandsEverythingToConnectInBoundedTime() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            for (int i = 0; i < 3; i++) {
                h.write("c", i, "RUNNING");
            }
            Harness.await(() -> h.sidecar.pendingCount() == 3, 2_000, "pending at the sidecar");
            h.sidecar.stop();
            h.write(h.task("c", 0, "UNASSIGNED", true));
            h.write(h.task("c", 3, "UNASSIGNED", true));
            long took = h.stop(5_000);
            // Bounded by stop.timeout.ms + lease.ms + the margin (1.7 s here), with slack for a loaded machine.
            assertTrue(took < h.options.stopTimeoutMs + h.options.leaseMs + Sender.FENCE_MARGIN_MS + 3_000,
                    "stop took " + took + " ms");
            assertEquals(Router.Path.STOPPED, h.router.path());
            h.assertInvariants();
            assertEquals(4, h.connectWrites().size());
            for (StatusUpdate u : h.connect.agentWrites()) {
                assertFalse(u.key.equals("status-task-c-0") && u.safe,
                        "c-0's putSafe follows an unsettled put of this worker: written unconditionally");
            }
            assertFalse(h.write("c", 1, "UNASSIGNED"), "after stop every write runs the original");
        }
    }

    @Test
    void stopWithTheSidecarUpLeavesItTheWritesItHolds() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "UNASSIGNED");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "pending at the sidecar");
            h.stop(2_000);
            assertTrue(h.sidecar.finalSeen(), "the last request told the sidecar it owns what it holds");
            assertTrue(h.connectWrites().isEmpty());
            Thread.sleep(h.options.leaseMs + 50);
            assertEquals(1, h.sidecar.release(), "past the lease, a final session's writes are still written");
            h.assertInvariants();
        }
    }

    @Test
    void refusedAndDroppedWritesAreSettledAndCounted() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.sidecar.refuse.add("status-task-big-0");
            h.sidecar.drop.add("status-task-old-0");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("big", 0, "FAILED");
            h.write(h.task("old", 0, "UNASSIGNED", true));
            h.write("ok", 0, "RUNNING");
            Harness.await(() -> h.router.size() == 0, 2_000, "all settled");
            assertEquals(1, h.metrics.refusedTotal());
            assertEquals(1, h.metrics.droppedTotal());
            assertEquals(1, h.metrics.handedOverTotal());
        }
    }

    @Test
    void theKip1278CountersComeFromTheOutcomes() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.sidecar.attempts.put("status-task-c-0", 3L);
            h.sidecar.attempts.put("status-task-c-1", 6L);
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.router.size() == 0, 2_000, "c-0 settled");
            assertEquals(1, h.metrics.successTotal());
            assertEquals(2, h.metrics.retryTotal());
            h.sidecar.writeAtOnce = false;
            h.write("c", 1, "RUNNING");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "c-1 pending");
            assertEquals(1, h.sidecar.fail());
            Harness.await(() -> h.router.size() == 0, 2_000, "c-1 settled");
            assertEquals(1, h.metrics.successTotal());
            assertEquals(1, h.metrics.failureTotal());
            assertEquals(7, h.metrics.retryTotal());
        }
    }

    @Test
    void aWriteTheSidecarGaveUpAfterARetriableErrorIsSentAgainUntilItLands() throws Exception {
        // The fault matrix's worker-killed-in-outage row (bench/fault_matrix.py): Kafka away, the sidecar gave a write
        // up after its retries and answered "failed", which the agent settled for good: the status was lost where a
        // stock worker's store sends a write that failed retriably again until it lands. Given up without Kafka
        // refusing it, it is "expired", the agent's again: sent again, as often as the sidecar gives it up.
        try (Harness h = new Harness()) {
            // A write bound long enough that rule 5 (no outcome within it) never asks meanwhile on a loaded machine.
            h.sidecar.writeBoundMs = 30_000;
            h.start("");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "PAUSED");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "PAUSED pending");
            for (int given = 1; given <= 2; given++) {
                assertEquals(1, h.sidecar.giveUp());
                Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "PAUSED sent again, time " + given);
            }
            h.sidecar.writeAtOnce = true;
            assertEquals(1, h.sidecar.release());
            Harness.await(() -> h.router.size() == 0, 2_000, "settled, and read back");
            h.assertInvariants();
            assertEquals(1, h.sidecarWrites().size(), "the sidecar wrote the pause: " + h.topic.records());
            assertTrue(h.connectWrites().isEmpty(), "nothing through Connect: " + h.topic.records());
            assertEquals(Router.Path.SIDECAR, h.router.path());
            assertEquals(0, h.metrics.failureTotal());
            assertEquals(1, h.metrics.successTotal());
        }
    }

    @Test
    void theKip1278CountersCountAWriteInFlightWhenANewerOneOfItsKeyFollowed() throws Exception {
        // Kafka slow behind the sidecar: c-0 RUNNING in flight when c-0 PAUSED is taken; both are written. The agent's
        // ack passed RUNNING once PAUSED replaced it in the table, and RUNNING's outcome was not counted (a worker's
        // status-update-success-total said 112 while its sidecar wrote all 119 of its updates).
        try (Harness h = new Harness()) {
            // A write bound long enough that rule 5 (no outcome within it) never asks meanwhile on a loaded machine.
            h.sidecar.writeBoundMs = 30_000;
            h.start("");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.sidecar.inFlight = true;
            h.write("c", 0, "RUNNING");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "RUNNING in flight");
            h.write("c", 0, "PAUSED");
            Harness.await(() -> h.sidecar.pendingCount() == 2, 2_000, "PAUSED behind it");
            int posts = h.sidecar.posts().size();
            Harness.await(() -> h.sidecar.posts().size() >= posts + 3, 2_000, "polls acknowledging what they may");
            assertEquals(2, h.sidecar.release());
            Harness.await(() -> h.router.size() == 0, 2_000, "settled");
            h.assertInvariants();
            Harness.await(() -> h.metrics.successTotal() == 2, 2_000, "both written writes counted, now "
                    + h.metrics.successTotal());
        }
    }

    @Test
    void flushWaitsUntilTheSidecarSettledWhatItWasGiven() throws Exception {
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "UNASSIGNED");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "pending");
            assertFalse(h.router.awaitSettled(200));
            new Thread(() -> {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
                h.sidecar.release();
            }).start();
            assertTrue(h.router.awaitSettled(2_000));
            Map<String, String> latest = h.topic.latest();
            assertEquals(h.newest, latest);
            // While Connect waited in flush, the agent asked the sidecar to hold its answers for the outcomes
            // (a poll saved per flush); before and after, never.
            List<Object> waits = new ArrayList<>();
            for (Map<?, ?> post : h.sidecar.posts()) {
                waits.add(post.get("wait_ms"));
            }
            // Half the read timeout (150 ms here) at most, so a held answer never times the request out.
            assertTrue(waits.contains(75L), "no request held for the flush: " + waits);
            assertEquals(null, waits.get(0), "a request outside a flush asked to wait: " + waits);
        }
    }

    @Test
    void aFlushHoldsTheRebalanceUntilAWriteTakenBeforeItLandsHoweverLongKafkaIsAway() throws Exception {
        // Connect 4.4.0, Kafka away for everyone 30 s (the fault matrix's kafka-away-30s): the worker that lost the
        // broker's coordinator revoked connector flip and wrote its UNASSIGNED; the stock worker's flush held the
        // rebalance 34 s, until its producer delivered that record. The pod's agent gave up after flush.timeout.ms (then
        // 5 s), the group rebalanced as Kafka came back, the new owner's PAUSED landed, and the sidecar's UNASSIGNED,
        // sent again after its retry backoff, landed after it: the connector stayed UNASSIGNED.
        try (Harness h = new Harness().start("")) {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.connect.canWrite = false;
            StatusUpdate revoked = h.task("c", 0, "UNASSIGNED", true);
            h.write(revoked);
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "UNASSIGNED pending: Kafka away for everyone");
            AtomicBoolean settled = new AtomicBoolean();
            Thread flush = flushing(h, settled);
            // Kafka stays away longer than the agent's flush used to wait.
            flush.join(6_000);
            // Kafka is back: the sidecar writes what it held after its retry backoff; the group rebalances once every
            // worker's flush has returned, and the new owner writes the connector's status.
            Thread sidecarBack = new Thread(() -> {
                Sender.pause(300);
                h.sidecar.release();
            }, "kafka back");
            sidecarBack.start();
            flush.join(10_000);
            assertFalse(flush.isAlive(), "the flush still waits after the write landed");
            assertTrue(settled.get(), "the flush returned before the write taken before it landed");
            h.topic.append(revoked.key, "v100", "new owner", Topic.value(h.task("c", 0, "PAUSED", false)));
            sidecarBack.join(2_000);
            assertEquals("v100", h.topic.latest().get(revoked.key), "the revoked worker's UNASSIGNED landed over the "
                    + "new owner's PAUSED: " + h.topic.records());
        }
    }

    @Test
    void aFlushWaitsForTheWritesTakenBeforeItNotForThoseTakenWhileItWaits() throws Exception {
        // A stock worker's flush waits for the records its producer took before it, not for those sent meanwhile.
        try (Harness h = new Harness()) {
            h.sidecar.writeBoundMs = 30_000;
            h.start("");
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.sidecar.writeAtOnce = false;
            h.write("c", 0, "UNASSIGNED");
            Harness.await(() -> h.sidecar.pendingCount() == 1, 2_000, "c-0 pending");
            AtomicBoolean settled = new AtomicBoolean();
            Thread flush = flushing(h, settled);
            Harness.await(h.router::flushWaiting, 2_000, "the flush waiting");
            h.write("d", 0, "RUNNING");
            Harness.await(() -> h.sidecar.pendingCount() == 2, 2_000, "d-0, taken while the flush waits, pending");
            assertEquals(1, h.sidecar.release("status-task-c-0"::equals));
            flush.join(5_000);
            assertFalse(flush.isAlive(), "the flush waits for d-0, taken after it began");
            assertTrue(settled.get());
            assertEquals(1, h.sidecar.pendingCount(), "d-0 still pending when the flush returned");
            h.sidecar.release();
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
        }
    }

    @Test
    void writesTakenTogetherGoInOneRequestNotBehindTheFirstOnesHeldAnswer() throws Exception {
        // Connect 4.4.0, a connector resumed (bench.connect_outage, the agent's timestamps in the worker): its status
        // taken, a request sent with it alone 0.1 ms later, its three tasks' RUNNING taken 0.3 to 1.3 ms after that;
        // they went only once the first request's answer came, held until Kafka acknowledged it (23 ms at that load),
        // so the worker read the last of them back 15 ms after a stock worker would have. Here 10 ms apart, within
        // the test's gather window (100 ms).
        Harness h = new Harness();
        Thread sender = startGathering(h, 100);
        try {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("c", 0, "RUNNING");
            Thread.sleep(10);
            h.write("c", 1, "RUNNING");
            Thread.sleep(10);
            h.write("c", 2, "RUNNING");
            h.awaitNewestLanded(2_000);
            List<Integer> carried = new ArrayList<>();
            for (Map<?, ?> post : h.sidecar.posts()) {
                int n = ((List<?>) post.get("updates")).size();
                if (n > 0) {
                    carried.add(n);
                }
            }
            assertEquals(Arrays.asList(3), carried, "writes per request");
            h.assertInvariants();
        } finally {
            h.close();
            sender.join(5_000);
        }
    }

    @Test
    void aFlushOrAStopSendsWhatItWaitsForAtOnceNotAfterTheGather() throws Exception {
        // A guard: with a gather window of a minute, a write taken before a flush goes as soon as the flush begins, and
        // one taken before the store stops goes in the final request.
        Harness h = new Harness();
        Thread sender = startGathering(h, 60_000);
        try {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("c", 0, "UNASSIGNED");
            assertTrue(h.router.awaitSettled(5_000), "the flush waited for the gather");
            h.write("c", 1, "UNASSIGNED");
            h.stop(5_000);
            assertEquals(2, updatesSent(h));
            assertTrue(h.connectWrites().isEmpty(), "through Connect: " + h.connectWrites());
        } finally {
            h.close();
            sender.join(5_000);
        }
    }

    /** {@link Harness#start} with the sender's gather window set to {@code gatherMs}; returns the sender's thread. */
    private static Thread startGathering(Harness h, long gatherMs) throws Exception {
        h.sidecar.start();
        h.options = AgentOptions.parse("url=" + h.sidecar.url() + "," + Harness.TIMINGS,
                Collections.<String, String>emptyMap());
        ReadBack readBack = new ReadBack(2 * h.options.maxKeys, 60_000);
        h.topic.reader(readBack::read);
        h.router = new Router(h.options.maxKeys, h.metrics, readBack);
        Sender sender = new Sender(h.options, h.router, new SidecarClient(h.options.url, Token.from(null, null),
                h.options.connectTimeoutMs, h.options.readTimeoutMs, null), h.connect, h.metrics, h.warnings,
                "cluster-1", "connect-status");
        sender.gatherMs = gatherMs;
        Thread thread = new Thread(sender, "test-sender");
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    /** Connect's flush on a thread of its own, as a rebalance runs it: {@code settled} gets what it returned. */
    private static Thread flushing(Harness h, AtomicBoolean settled) {
        Thread flush = new Thread(() -> {
            try {
                settled.set(h.router.awaitSettled(h.options.flushTimeoutMs));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "flush");
        flush.start();
        return flush;
    }
}
