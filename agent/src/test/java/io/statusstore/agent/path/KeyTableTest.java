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
            assertTrue(table.offer(u, true));
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
        assertTrue(table.offer(task("a", 0, "RUNNING", false), true));
        assertTrue(table.offer(task("b", 0, "RUNNING", false), true));
        for (int i = 0; i < 100; i++) {
            assertTrue(table.offer(task("a", 0, i % 2 == 0 ? "PAUSED" : "RUNNING", false), true));
        }
        assertFalse(table.offer(task("c", 0, "RUNNING", false), true));
        assertEquals(2, table.size());
    }

    @Test
    void aPendingWriteStaysUntilItsOutcomeAndANewerOneReplacesIt() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        table.offer(a1, true);
        table.takeBatch(10, 0);
        table.accepted(a1, 0);
        assertTrue(table.hasPending());
        assertEquals(a1.seq, table.lowestUnsettledSeq());
        StatusUpdate a2 = task("a", 0, "PAUSED", false);
        table.offer(a2, true);
        table.takeBatch(10, 0);
        table.accepted(a2, 0);
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
        table.offer(a1, true);
        table.offer(b1, true);
        List<StatusUpdate> batch = table.takeBatch(10, 0);
        StatusUpdate a2 = task("a", 0, "PAUSED", false);
        table.offer(a2, true);
        for (StatusUpdate u : batch) {
            table.returned(u);
        }
        assertEquals(seqs(java.util.Arrays.asList(b1, a2)), seqs(table.takeBatch(10, 0)));
    }

    @Test
    void droppedOrRefusedWritesAreSettledOnArrival() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "UNASSIGNED", true);
        table.offer(a1, true);
        table.takeBatch(10, 0);
        table.settledOnArrival(a1);
        assertTrue(table.isEmpty());
    }

    @Test
    void aRestartedSidecarGetsWhatWasPendingAgain() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        StatusUpdate b1 = task("b", 0, "RUNNING", false);
        table.offer(a1, true);
        table.offer(b1, true);
        table.takeBatch(10, 0);
        table.accepted(a1, 0);
        table.accepted(b1, 0);
        StatusUpdate b2 = task("b", 0, "PAUSED", false);
        table.offer(b2, true);
        assertEquals(2, table.resendPending(0, () -> ++seq));
        assertFalse(table.hasPending());
        List<StatusUpdate> again = table.takeBatch(10, 0);
        assertEquals(seqs(java.util.Arrays.asList(b2)), seqs(again.subList(0, 1)));
        assertEquals(a1.key, again.get(1).key);
        assertEquals("RUNNING", again.get(1).state);
        assertTrue(again.get(1).seq > b2.seq, "sent again under a new seq");
    }

    @Test
    void aNewerWriteThatWentToTheNewInstanceIsSentAgainAfterTheOldOnesHold() {
        // The request that shows the sidecar restarted carried a2 to the new instance, while the old one still holds
        // a1 and may write it late in its lease: a2 goes once more after that, so it lands last.
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        table.offer(a1, true);
        table.takeBatch(10, 0);
        table.accepted(a1, 0);
        StatusUpdate a2 = task("a", 0, "PAUSED", false);
        table.offer(a2, true);
        assertEquals(seqs(java.util.Arrays.asList(a2)), seqs(table.takeBatch(10, 0)));
        table.resendPending(1_000, () -> ++seq);
        table.accepted(a2, 0);
        assertTrue(table.settle(a2.key, a2.seq));
        assertTrue(table.takeBatch(10, 999).isEmpty());
        List<StatusUpdate> after = table.takeBatch(10, 1_000);
        assertEquals(1, after.size());
        assertEquals("PAUSED", after.get(0).state);
    }

    @Test
    void keysPendingAtARestartedSidecarWaitUntilTheOldLeaseEnded() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        table.offer(a1, true);
        table.takeBatch(10, 0);
        table.accepted(a1, 0);
        table.resendPending(1_000, () -> ++seq);
        StatusUpdate a2 = task("a", 0, "PAUSED", false);
        StatusUpdate b1 = task("b", 0, "RUNNING", false);
        table.offer(a2, true);
        table.offer(b1, true);
        assertEquals(seqs(java.util.Arrays.asList(b1)), seqs(table.takeBatch(10, 999)), "a key not held goes at once");
        assertEquals(1_000, table.nextRelease(999));
        assertEquals(seqs(java.util.Arrays.asList(a2)), seqs(table.takeBatch(10, 1_000)));
        assertEquals(-1, table.nextRelease(1_000));
    }

    @Test
    void aSafeWriteOverAnUnsettledUnconditionalOneBecomesUnconditional() {
        KeyTable table = new KeyTable(10);
        StatusUpdate put = task("a", 0, "RUNNING", false);
        table.offer(put, true);
        table.offer(task("a", 0, "UNASSIGNED", true), true);
        StatusUpdate sent = table.takeBatch(10, 0).get(0);
        assertEquals("UNASSIGNED", sent.state);
        assertFalse(sent.safe, "had the put been written, the same worker's putSafe would have passed");
        table.accepted(sent, 0);
        table.offer(task("b", 0, "UNASSIGNED", true), true);
        assertTrue(table.takeBatch(10, 0).get(0).safe, "a putSafe alone stays safe");
    }

    @Test
    void leavingTheSidecarAKeyWithNothingThereGoesAtOnceTheOthersAfterTheirFence() {
        KeyTable table = new KeyTable(10);
        StatusUpdate a1 = task("a", 0, "RUNNING", false);
        StatusUpdate b1 = task("b", 0, "RUNNING", false);
        table.offer(a1, true);
        table.offer(b1, true);
        table.takeBatch(10, 0);
        table.accepted(a1, 0);
        table.accepted(b1, 0);
        StatusUpdate a2 = task("a", 0, "FAILED", true);
        table.offer(a2, true);
        StatusUpdate c1 = task("c", 0, "RUNNING", false);
        table.offer(c1, true);
        assertEquals(2, table.fence(5_000));
        assertFalse(table.offer(task("d", 0, "RUNNING", false), false), "leaving, a key not in the table is not taken");
        assertSame(c1, table.takeReady(100), "nothing of c at the sidecar: at once");
        assertNull(table.takeReady(4_999), "a and b wait for the fence");
        assertEquals(5_000, table.nextFence(4_999));
        table.drained(c1);
        StatusUpdate first = table.takeReady(5_000);
        assertSame(b1, first, "the key whose newest write is oldest first");
        table.drained(first);
        StatusUpdate second = table.takeReady(5_000);
        assertEquals(a2.seq, second.seq);
        assertFalse(second.safe, "the pending put of its key may not be written");
        StatusUpdate a3 = task("a", 0, "RUNNING", false);
        assertTrue(table.offer(a3, false), "written while its key is handed to Connect: it waits for that");
        assertNull(table.takeReady(5_000), "not before Connect took the write before it");
        table.drained(second);
        assertSame(a3, table.takeReady(5_000));
        table.drained(a3);
        assertTrue(table.isEmpty());
        assertNull(table.takeReady(5_000));
    }
}
