package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;
import org.junit.jupiter.api.Test;

import java.util.Collections;
import java.util.List;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * A write the agent held past its fence, whose key another worker deleted meanwhile (Connect's leader tombstones the
 * statuses of a connector the config topic no longer holds, after the rebalance its deletion causes): it is not
 * written through Connect late, as Connect abandons a retry of a write whose key it read a tombstone of since
 * (its cache entry is deleted). Before, the deleted connector's UNASSIGNED (its worker's putSafe as the connector
 * stopped, said "written" by a lying sidecar) landed after the leader's tombstone: the fault matrix's
 * answers-written-untruly row ended with the deleted connector UNASSIGNED in the topic and in every REST view.
 */
class DeletedKeyTest {
    private static final String WORKER = "127.0.0.1:8083";

    private static StatusUpdate connector(String name, String state, String marker, boolean safe) {
        return StatusUpdate.connector(name, state, marker, WORKER, 1, true, null, safe, null);
    }

    /** Another worker's tombstone of {@code key} lands on the topic (this worker's store reads it). */
    private static void deletedElsewhere(Harness h, String key) {
        h.topic.append(key, "tombstone", "leader", null);
    }

    /** An agent on the sidecar's path whose sidecar answers each write "written" and writes none. */
    private static Harness onALyingSidecar() throws Exception {
        Harness h = new Harness().start("");
        try {
            h.awaitPath(Router.Path.SIDECAR, 2_000);
        } catch (RuntimeException | Error e) {
            h.close();
            throw e;
        }
        h.sidecar.lying = true;
        return h;
    }

    private static List<String> fellBack(Harness h) {
        return h.connect.agentWrites().stream().map(u -> u.key + " " + u.trace).collect(Collectors.toList());
    }

    @Test
    void aHeldWriteOfAConnectorDeletedMeanwhileIsNotWrittenOverItsTombstone() throws Exception {
        try (Harness h = onALyingSidecar()) {
            // The connector stops on this worker as it is deleted: its putSafe UNASSIGNED, and one of its tasks'.
            h.write(connector("c", "UNASSIGNED", "v1", true));
            h.write(StatusUpdate.task("c", 0, "UNASSIGNED", "v2", WORKER, 1, true, null, true, null));
            // The leader tombstones it after the rebalance: the connector's key, which deletes its tasks too.
            deletedElsewhere(h, "status-connector-c");
            // The lie is found (not read back), the fence passes, and the table empties.
            h.awaitPath(Router.Path.CONNECT, 8_000);
            assertEquals(Collections.emptyList(), fellBack(h), "nothing of the deleted connector written through Connect");
            assertEquals("tombstone", h.topic.latest().get("status-connector-c"));
            assertNull(h.topic.latest().get("status-task-c-0"));
        }
    }

    @Test
    void aWriteTakenAfterTheTombstoneWasReadIsWritten() throws Exception {
        try (Harness h = onALyingSidecar()) {
            h.write(connector("c", "UNASSIGNED", "v1", true));
            deletedElsewhere(h, "status-connector-c");
            // The connector created again and started here: a new status, after the deletion (Connect's new cache entry).
            h.write(connector("c", "RUNNING", "v2", false));
            h.awaitPath(Router.Path.CONNECT, 8_000);
            assertEquals(Collections.singletonList("status-connector-c v2"), fellBack(h));
            assertEquals("v2", h.topic.latest().get("status-connector-c"));
        }
    }

    @Test
    void aTombstoneTheAgentMayHaveWrittenItselfAbandonsNothing() throws Exception {
        try (Harness h = onALyingSidecar()) {
            // This worker deletes the connector (the leader's DESTROYED), and creates it again; a tombstone then read
            // may be its own DESTROYED, which tells nothing of the newer write.
            h.write(connector("c", "DESTROYED", "v1", false));
            h.write(connector("c", "RUNNING", "v2", false));
            deletedElsewhere(h, "status-connector-c");
            h.awaitPath(Router.Path.CONNECT, 8_000);
            assertEquals("v2", h.topic.latest().get("status-connector-c"));
        }
    }

    /**
     * Two workers' agents hand their held statuses of one key to their producers at the same moment (their fences ended
     * together): the leader's tombstone lands first, after this agent's checks, and then this worker's older
     * UNASSIGNED. Before, the deleted connector kept that UNASSIGNED (the quick answers-written-untruly row of the fault
     * matrix, once in a whole-suite run); now the agent, reading its status land right after a tombstone no check saw,
     * writes the tombstone again.
     */
    @Test
    void aHeldWriteThatLandsRightAfterATombstoneNoCheckSawIsUndone() throws Exception {
        try (Harness h = onALyingSidecar()) {
            h.write(connector("c", "UNASSIGNED", "v1", true));
            h.connect.landsFirst = u -> deletedElsewhere(h, u.key);
            h.awaitPath(Router.Path.CONNECT, 8_000);
            assertEquals(Collections.singletonList("status-connector-c v1"), fellBack(h));
            assertEquals("tombstone", h.topic.latest().get("status-connector-c"), h.topic.records().toString());
            assertEquals(Collections.singletonList("status-connector-c"), h.connect.rewrites());
            assertEquals(1, h.metrics.undoneTotal());
        }
    }

    /** The same with the new owner's status of a higher generation landing first: it is written again, exactly. */
    @Test
    void aHeldWriteThatLandsRightAfterANewerOwnersStatusNoCheckSawIsUndone() throws Exception {
        try (Harness h = onALyingSidecar()) {
            h.write(StatusUpdate.task("c", 0, "RUNNING", "v1", WORKER, 1, true, null, false, null));
            h.connect.landsFirst = u -> h.topic.append(u.key, "owner", "other worker",
                    Topic.value("task", "RUNNING", "owner", "127.0.0.1:8084", 2, null, "c", 0, 0));
            h.awaitPath(Router.Path.CONNECT, 8_000);
            assertEquals("owner", h.topic.latest().get("status-task-c-0"), h.topic.records().toString());
            assertEquals(1, h.metrics.undoneTotal());
        }
    }

    /**
     * What lands first and does not win over the held status under Connect's rules is left under it: another worker's
     * status of a generation no higher, and a tombstone when the agent took one of the key itself (it may be its own).
     */
    @Test
    void aHeldWriteThatLandsOverWhatItWouldWinOverStays() throws Exception {
        try (Harness h = onALyingSidecar()) {
            h.write(StatusUpdate.task("c", 0, "RUNNING", "v1", WORKER, 2, true, null, false, null));
            h.write(connector("d", "DESTROYED", "v2", false));
            h.write(connector("d", "RUNNING", "v3", false));
            h.connect.landsFirst = u -> {
                h.topic.append("status-task-c-0", "old owner", "other worker",
                        Topic.value("task", "UNASSIGNED", "old owner", "127.0.0.1:8084", 2, null, "c", 0, 0));
                deletedElsewhere(h, "status-connector-d");
            };
            h.awaitPath(Router.Path.CONNECT, 8_000);
            assertEquals("v1", h.topic.latest().get("status-task-c-0"), h.topic.records().toString());
            assertEquals("v3", h.topic.latest().get("status-connector-d"), h.topic.records().toString());
            assertEquals(Collections.emptyList(), h.connect.rewrites());
            assertEquals(0, h.metrics.undoneTotal());
        }
    }
}
