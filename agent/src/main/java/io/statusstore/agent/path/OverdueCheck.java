package io.statusstore.agent.path;

import io.statusstore.agent.Warnings;
import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * Rule 5: writes pending at the sidecar past their write bound without an outcome (or said timed out). The worker's
 * own producer is asked whether it can write to their partitions a second before the oldest's write bound, and its
 * answer judged at the bound, not a poll and a second later, nor once the sidecar's producer finds the timed-out
 * attempt: so the agent ends the lease before the sidecar holds the partition and sends the write again as its probe,
 * whose attempt would hold the key (and a rebalance's flush) another write bound. If it can, and the writes still have
 * no outcome at their bound, the sidecar cannot reach Kafka, or keeps from the agent what became of them, and is to be
 * left; if it cannot either, Kafka is away for everyone and the statuses stay with the sidecar, which holds them and
 * probes cheaply (falling back would be the stock worker's storm of re-sends, and its stale keys); asked again after
 * another bound. When the worker's producer writes again after that, Kafka is back for everyone: the sidecar writes
 * what it held as the worker's probe lands, and its outcomes come on its next answer, so it is left only if the
 * overdue writes still have none after the answer bound. Used by the sender's thread only.
 */
final class OverdueCheck {
    /**
     * The worker's own producer is asked this long before a write's bound, so that its answer is in hand there: the
     * sidecar's producer finds the timed-out attempt within a second of the bound and sends it again as its held
     * partition's probe a few hundred ms later, which the lease's end must come before.
     */
    static final long ASK_LEAD_MS = 1_000;
    private final Router router;
    private final ConnectPath connect;
    private final Warnings warnings;
    /** The question to the worker's own producer while it is out, when it went, about which writes. */
    private CompletableFuture<Boolean> asked;
    private long askedAt;
    /** When the writes asked about are overdue (the oldest's bound): the answer is judged then, not before. */
    private long decideAt;
    private long nextAt;
    private List<StatusUpdate> overdue = Collections.emptyList();
    /** Whether the worker's own producer could not write either, since the agent came to the sidecar. */
    private boolean awayForEveryone;
    /**
     * When the worker's own producer wrote after Kafka was away for everyone (-1: it did not): Kafka is back, for the
     * sidecar too, whose outcomes come on its next answer; the overdue writes are judged once it has had time to give
     * them.
     */
    private long backAt = -1;

    OverdueCheck(Router router, ConnectPath connect, Warnings warnings) {
        this.router = router;
        this.connect = connect;
        this.warnings = warnings;
    }

    /**
     * The agent is on the sidecar again: a question asked before it left is about writes since settled through
     * Connect, and its answer is not judged.
     */
    void reset() {
        asked = null;
        decideAt = 0;
        nextAt = 0;
        overdue = Collections.emptyList();
        awayForEveryone = false;
        backAt = -1;
    }

    /**
     * When {@link #leave} may next find something to do (the sender waits no longer than that), or -1: the oldest
     * pending write's bound, or, while the worker's producer is asked, the end of the wait for its answer (its answer
     * wakes the sender sooner).
     */
    long nextAt(long overdueAfterMs, long answerBoundMs) {
        if (asked != null) {
            return asked.isDone() ? decideAt : askedAt + answerBoundMs;
        }
        if (backAt >= 0) {
            return backAt + answerBoundMs;
        }
        long oldest = router.oldestPendingSince();
        return oldest < 0 ? -1 : Math.max(nextAt, oldest + Math.max(0, overdueAfterMs - ASK_LEAD_MS));
    }

    /**
     * Why the sidecar is to be left (its pending writes overdue by {@code overdueAfterMs} while the worker's producer
     * wrote within {@code answerBoundMs}), or null; {@code sidecar} names it in the lines. The worker's producer is
     * asked again {@code againMs} after an answer.
     */
    String leave(long now, long overdueAfterMs, long againMs, long answerBoundMs, String sidecar) {
        if (backAt >= 0) {
            return leaveIfStillPending(now, overdueAfterMs, answerBoundMs, sidecar);
        }
        if (asked == null) {
            if (now < nextAt) {
                return null;
            }
            overdue = router.pendingSince(now - Math.max(0, overdueAfterMs - ASK_LEAD_MS));
            if (overdue.isEmpty()) {
                return null;
            }
            decideAt = router.oldestPendingSince() + overdueAfterMs;
            List<String> keys = new ArrayList<>();
            for (StatusUpdate u : overdue) {
                keys.add(u.key);
            }
            asked = connect.canWrite(keys);
            askedAt = now;
            // Its answer is judged as soon as it comes, not at the next poll.
            asked.whenComplete((wrote, failed) -> router.wake());
        }
        boolean late = now - askedAt >= answerBoundMs;
        if (!asked.isDone() && !late) {
            return null;
        }
        if (now < decideAt && !late) {
            return null;
        }
        boolean wrote = asked.getNow(false);
        asked = null;
        nextAt = now + againMs;
        if (wrote && awayForEveryone) {
            // Kafka is back for everyone: the sidecar's held writes go as the worker's probe does, but their outcomes
            // come only on its next answer. It is left only if they are still without one after the answer bound.
            backAt = now;
            return leaveIfStillPending(now, overdueAfterMs, answerBoundMs, sidecar);
        }
        // Asked before their bound: the sidecar's word on them may have settled them meanwhile. Only those still
        // without an outcome past their bound count.
        List<StatusUpdate> still = stillPending(overdue, now - overdueAfterMs);
        if (still.isEmpty()) {
            nextAt = now;
            return null;
        }
        if (wrote) {
            return overdueLine(still, overdueAfterMs, sidecar) + ", while the worker's own producer wrote to their "
                    + "partitions: it cannot reach Kafka, or keeps from the agent what became of them";
        }
        String what = overdueLine(still, overdueAfterMs, sidecar);
        awayForEveryone = true;
        warnings.warn("kafka away", what + ", and the worker's own producer could not write to their partitions "
                + "either (" + (late ? "no answer within " + answerBoundMs + " ms" : "it failed") + "): Kafka is away "
                + "for everyone, the statuses stay with the sidecar");
        return null;
    }

    /**
     * After Kafka came back for everyone: the overdue writes the sidecar has still given no outcome for once the answer
     * bound has passed since then make it left; none still pending, the agent stays (the question starts over).
     */
    private String leaveIfStillPending(long now, long overdueAfterMs, long answerBoundMs, String sidecar) {
        // By key: a write the sidecar gave back (expired) and took again is the same key's, still without an outcome.
        Set<String> keys = new HashSet<>();
        for (StatusUpdate u : overdue) {
            keys.add(u.key);
        }
        List<StatusUpdate> still = new ArrayList<>();
        for (StatusUpdate u : router.pendingSince(backAt)) {
            if (keys.contains(u.key)) {
                still.add(u);
            }
        }
        if (still.isEmpty()) {
            backAt = -1;
            awayForEveryone = false;
            nextAt = now;
            return null;
        }
        if (now - backAt < answerBoundMs) {
            return null;
        }
        backAt = -1;
        return overdueLine(still, overdueAfterMs, sidecar) + ", and " + answerBoundMs + " ms more since the worker's "
                + "own producer wrote to their partitions again after Kafka was away for everyone: it cannot reach Kafka, "
                + "or keeps from the agent what became of them";
    }

    /** Of {@code writes}, by key, those still pending since {@code since} or before. */
    private List<StatusUpdate> stillPending(List<StatusUpdate> writes, long since) {
        Set<String> keys = new HashSet<>();
        for (StatusUpdate u : writes) {
            keys.add(u.key);
        }
        List<StatusUpdate> still = new ArrayList<>();
        for (StatusUpdate u : router.pendingSince(since)) {
            if (keys.contains(u.key)) {
                still.add(u);
            }
        }
        return still;
    }

    private static String overdueLine(List<StatusUpdate> writes, long overdueAfterMs, String sidecar) {
        return "the sidecar at " + sidecar + " has given no outcome for " + writes.size() + " write(s) (the oldest "
                + writes.get(0) + ") within its write bound (" + overdueAfterMs + " ms), or said that their last "
                + "attempt waited out its write bound";
    }
}
