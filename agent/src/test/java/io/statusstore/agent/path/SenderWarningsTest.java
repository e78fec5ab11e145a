package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The sender's warnings come at most once a minute per cause, a cause being a kind of event (never a key, never free
 * text), and a repeat is counted in its cause's next line: a sidecar that flaps, or refuses many statuses, costs a line a
 * minute, and the line says how many more there were.
 */
class SenderWarningsTest {
    private static final String MORE = " more like it since the last such line)";

    @Test
    void aFlappingSidecarsSwitchLineComesOnceAMinutePerKindOfReasonWithACount() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness().start("")) {
            String away = "falling back to Connect's own status path: the sidecar at " + h.sidecar.url() + " is away";
            for (int i = 0; i < 3; i++) {
                leaveOnce(h, "away" + i);
            }
            assertEquals(1, containing(log, away).size(), "one line for three switches within a minute: " + log.lines());
            // Another kind of reason has a minute of its own.
            h.awaitPath(Router.Path.SIDECAR, 4_000);
            h.sidecar.token = "rotated";
            h.write("refused", 0, "RUNNING");
            h.awaitPath(Router.Path.CONNECT, 4_000);
            h.sidecar.token = null;
            assertEquals(1, containing(log, "falling back to Connect's own status path: the sidecar at " + h.sidecar.url()
                    + " refuses the agent").size(), log.lines().toString());
            h.aMinutePasses();
            leaveOnce(h, "away3");
            List<String> lines = containing(log, away);
            assertEquals(2, lines.size(), lines.toString());
            assertTrue(lines.get(1).endsWith("(2" + MORE), "the next line counts the switches not logged: " + lines);
            assertEquals(10, h.metrics.switchesTotal(), "every switch is counted: to the sidecar and away, five times");
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
        }
    }

    @Test
    void refusedStatusesOfManyKeysAreOneLineAMinuteWithACount() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness().start("")) {
            for (int task = 0; task < 3; task++) {
                h.sidecar.refuse.add("status-task-huge-" + task);
            }
            h.awaitPath(Router.Path.SIDECAR, 2_000);
            h.write("huge", 0, "FAILED");
            h.write("huge", 1, "FAILED");
            Harness.await(() -> h.metrics.refusedTotal() == 2, 2_000, "two refused");
            String refused = "the sidecar refused the status of status-task-huge-";
            assertEquals(1, settledLines(log, refused, 1).size(), "one line for two keys: " + log.lines());
            h.aMinutePasses();
            h.write("huge", 2, "FAILED");
            List<String> lines = settledLines(log, refused, 2);
            assertEquals(2, lines.size(), lines.toString());
            assertTrue(lines.get(1).contains("status-task-huge-2 for good: too large"), lines.toString());
            assertTrue(lines.get(1).endsWith("(1" + MORE), "the next line counts the key not logged: " + lines);
        }
    }

    @Test
    void aProbesReasonIsSaidAgainOnlyWhenItChangesAndItsRepeatsAreCounted() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness()) {
            h.sidecar.clusterId = "cluster-2";
            h.start("");
            String other = "serves Kafka cluster cluster-2";
            awaitProbes(h, 3);
            h.aMinutePasses();
            awaitProbes(h, 3);
            assertEquals(1, containing(log, other).size(), "the same reason is not said again: " + log.lines());
            h.sidecar.clusterId = "cluster-3";
            awaitProbes(h, 2);
            h.sidecar.clusterId = "cluster-2";
            awaitProbes(h, 3);
            List<String> lines = containing(log, other);
            assertEquals(2, lines.size(), "said again when the reason changed (back): " + lines);
            assertEquals(1, containing(log, "serves Kafka cluster cluster-3").size(), log.lines().toString());
            assertTrue(lines.get(1).matches(".* \\([1-9][0-9]*" + MORE.replace(")", "\\)")),
                    "the probes that found the same reason are counted: " + lines);
        }
    }

    @Test
    void connectsPathNotQuietIsSaidOnceAStayAndItsRepeatsAreCounted() throws Exception {
        AgentLines log = new AgentLines();
        try (Harness h = new Harness().start("quiet.timeout.ms=100")) {
            String notQuiet = "Connect's own status path still has writes in flight";
            notQuietFor(h, "q", 0);
            assertEquals(1, containing(log, notQuiet).size(), "once while the agent stays away: " + log.lines());
            h.aMinutePasses();
            notQuietFor(h, "q", 1);
            List<String> lines = containing(log, notQuiet);
            assertEquals(2, lines.size(), lines.toString());
            assertTrue(lines.get(1).matches(".* \\([1-9][0-9]*" + MORE.replace(")", "\\)")),
                    "the next stay's line counts the checks not logged: " + lines);
            h.awaitNewestLanded(2_000);
            h.assertInvariants();
        }
    }

    /** From the sidecar, the agent leaves it (a 503) and comes back: a switch each way. */
    private static void leaveOnce(Harness h, String connector) {
        h.awaitPath(Router.Path.SIDECAR, 4_000);
        h.sidecar.answering = FakeSidecar.Answering.UNAVAILABLE;
        h.write(connector, 0, "RUNNING");
        h.awaitPath(Router.Path.CONNECT, 4_000);
        h.sidecar.answering = FakeSidecar.Answering.OK;
    }

    /**
     * From the sidecar, the agent leaves it while Connect's own path keeps a write in flight: each probe finds the
     * sidecar ready and Connect's path not quiet, several times; then Connect's path goes quiet and the agent is back.
     */
    private static void notQuietFor(Harness h, String connector, int task) throws Exception {
        h.awaitPath(Router.Path.SIDECAR, 4_000);
        h.connect.holding = true;
        h.sidecar.answering = FakeSidecar.Answering.UNAVAILABLE;
        h.write(connector, task, "RUNNING");
        h.awaitPath(Router.Path.CONNECT, 4_000);
        h.sidecar.answering = FakeSidecar.Answering.OK;
        awaitProbes(h, 4);
        h.connect.release();
        h.awaitPath(Router.Path.SIDECAR, 4_000);
    }

    /** Waits for {@code n} more probes of the sidecar (each asks for its identity). */
    private static void awaitProbes(Harness h, int n) {
        int until = h.sidecar.gets() + n;
        Harness.await(() -> h.sidecar.gets() >= until, 4_000, n + " probes");
    }

    /**
     * The lines with {@code text} once there are {@code atLeast} (the sender logs a refusal after counting it), and
     * any that follow at once.
     */
    private static List<String> settledLines(AgentLines log, String text, int atLeast) throws Exception {
        Harness.await(() -> {
            try {
                return containing(log, text).size() >= atLeast;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }, 2_000, atLeast + " line(s) with " + text);
        Thread.sleep(100);
        return containing(log, text);
    }

    private static List<String> containing(AgentLines log, String text) throws IOException {
        return log.lines().stream().filter(line -> line.contains(text)).collect(Collectors.toList());
    }
}
