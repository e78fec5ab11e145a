package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

class KeyTableTest {
    private long seq;

    private StatusUpdate task(String connector, int task, String state, boolean safe) {
        return StatusUpdate.task(connector, task, state, null, "w:1", 1, false, null, safe, null).withSeq(++seq);
    }

    private static List<Long> seqs(List<StatusUpdate> updates) {
        return updates.stream().map(u -> u.seq).collect(Collectors.toList());
    }

    @Test
    void keepsOnlyTheNewestUnsentWriteOfAKeyAndSendsInOrder() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        StatusUpdate b1 = task("b", 0, "RUNNING", false);
        StatusUpdate a2 = task("a", 0, "PAUSED", false);
        StatusUpdate c1 = task("c", 0, "RUNNING", false);
        for (StatusUpdate u : new StatusUpdate[] {a1, b1, a2, c1}) {
            assertTrue(table.offer(u));
        }
        assertEquals(3, table.size());
        List<StatusUpdate> batch = table.takeBatch(2, 0);
        assertEquals(seqs(java.util.Arrays.asList(b1, a2)), seqs(batch));
        assertEquals(seqs(java.util.Arrays.asList(c1)), seqs(table.takeBatch(10, 0)));
        assertTrue(table.takeBatch(10, 0).isEmpty());
    }

    @Test
    void isBoundedByKeysNotWrites() {
        KeyTable table = new KeyTable(2);
        assertTrue(table.offer(task("a", 0, "RUNNING", false)));
        assertTrue(table.offer(task("b", 0, "RUNNING", false)));
        for (int i = 0; i < 100; i++) {
            assertTrue(table.offer(task("a", 0, i % 2 == 0 ? "PAUSED" : "RUNNING", false)));
        }
        assertFalse(table.offer(task("c", 0, "RUNNING", false)));
        assertEquals(2, table.size());
    }

    @Test
    void aPendingWriteStaysUntilItsOutcomeAndANewerOneReplacesIt() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        table.offer(a1);
        table.takeBatch(10, 0);
        table.accepted(a1);
        assertTrue(table.hasPending());
        assertEquals(a1.seq, table.lowestUnsettledSeq());
        StatusUpdate a2 = task("a", 0, "PAUSED", false);
        table.offer(a2);
        table.takeBatch(10, 0);
        table.accepted(a2);
        assertFalse(table.settle(a1.key, a1.seq), "the outcome of a replaced write settles nothing");
        assertEquals(1, table.size());
        assertTrue(table.settle(a2.key, a2.seq));
        assertTrue(table.isEmpty());
        assertEquals(-1, table.lowestUnsettledSeq());
    }

    @Test
    void aFailedRequestReturnsItsWritesUnlessNewerOnesWait() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        StatusUpdate b1 = task("b", 0, "RUNNING", false);
        table.offer(a1);
        table.offer(b1);
        List<StatusUpdate> batch = table.takeBatch(10, 0);
        StatusUpdate a2 = task("a", 0, "PAUSED", false);
        table.offer(a2);
        for (StatusUpdate u : batch) {
            table.returned(u);
        }
        assertEquals(seqs(java.util.Arrays.asList(b1, a2)), seqs(table.takeBatch(10, 0)));
    }

    @Test
    void droppedOrRefusedWritesAreSettledOnArrival() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "UNASSIGNED", true);
        table.offer(a1);
        table.takeBatch(10, 0);
        table.settledOnArrival(a1);
        assertTrue(table.isEmpty());
    }

    @Test
    void aRestartedSidecarGetsWhatWasPendingAgain() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        StatusUpdate b1 = task("b", 0, "RUNNING", false);
        table.offer(a1);
        table.offer(b1);
        table.takeBatch(10, 0);
        table.accepted(a1);
        table.accepted(b1);
        StatusUpdate b2 = task("b", 0, "PAUSED", false);
        table.offer(b2);
        assertEquals(2, table.resendPending(0));
        assertFalse(table.hasPending());
        assertEquals(seqs(java.util.Arrays.asList(a1, b2)), seqs(table.takeBatch(10, 0)));
    }

    @Test
    void keysPendingAtARestartedSidecarWaitUntilTheOldLeaseEnded() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        table.offer(a1);
        table.takeBatch(10, 0);
        table.accepted(a1);
        table.resendPending(1_000);
        StatusUpdate a2 = task("a", 0, "PAUSED", false);
        StatusUpdate b1 = task("b", 0, "RUNNING", false);
        table.offer(a2);
        table.offer(b1);
        assertEquals(seqs(java.util.Arrays.asList(b1)), seqs(table.takeBatch(10, 999)), "a key not held goes at once");
        assertEquals(1_000, table.nextRelease(999));
        assertEquals(seqs(java.util.Arrays.asList(a2)), seqs(table.takeBatch(10, 1_000)));
        assertEquals(-1, table.nextRelease(1_000));
    }

    @Test
    void aSafeWriteOverAnUnsettledUnconditionalOneBecomesUnconditional() {
        KeyTable table = new KeyTable(10);
        StatusUpdate put = task("a", 0, "RUNNING", false);
        table.offer(put);
        table.offer(task("a", 0, "UNASSIGNED", true));
        StatusUpdate sent = table.takeBatch(10, 0).get(0);
        assertEquals("UNASSIGNED", sent.state);
        assertFalse(sent.safe, "had the put been written, the same worker's putSafe would have passed");
        table.accepted(sent);
        table.offer(task("b", 0, "UNASSIGNED", true));
        assertTrue(table.takeBatch(10, 0).get(0).safe, "a putSafe alone stays safe");
    }

    @Test
    void drainingGivesTheNewestWriteOfEachKeyOldestKeyFirst() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        StatusUpdate b1 = task("b", 0, "RUNNING", false);
        table.offer(a1);
        table.offer(b1);
        table.takeBatch(10, 0);
        table.accepted(a1);
        table.accepted(b1);
        StatusUpdate a2 = task("a", 0, "FAILED", true);
        table.offer(a2);
        StatusUpdate first = table.takeOldest();
        assertSame(b1, first);
        StatusUpdate second = table.takeOldest();
        assertEquals(a2.seq, second.seq);
        assertFalse(second.safe, "the pending put of its key may not be written");
        assertNull(table.takeOldest());
    }
}
