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
 * Rule 5: writes pending at the sidecar past its write bound (and a poll) without an outcome. The worker's own
 * producer is asked whether it can write to their partitions: if it can, the sidecar cannot, or keeps from the agent
 * what became of them, and is to be left; if it cannot either, Kafka is away for everyone and the statuses stay with
 * the sidecar, which holds them and probes cheaply (falling back would be the stock worker's storm of re-sends, and
 * its stale keys); asked again after another bound. When the worker's producer writes again after that, Kafka is back
 * for everyone: the sidecar writes what it held as the worker's probe lands, and its outcomes come on its next answer,
 * so it is left only if the overdue writes still have none after the answer bound. Used by the sender's thread only.
 */
final class OverdueCheck {
    private final Router router;
    private final ConnectPath connect;
    private final Warnings warnings;
    /** The question to the worker's own producer while it is out, when it went, about which writes. */
    private CompletableFuture<Boolean> asked;
    private long askedAt;
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
     * The agent is on the sidecar again, or on a new instance of it (restarted): a question asked before is about
     * writes since settled through Connect, or pending at the old instance (sent again to the new one), and its answer
     * is not judged.
     */
    void reset() {
        asked = null;
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
    long nextAt(long outcomeBoundMs, long answerBoundMs) {
        if (asked != null) {
            return askedAt + answerBoundMs;
        }
        if (backAt >= 0) {
            return backAt + answerBoundMs;
        }
        long oldest = router.oldestPendingSince();
        return oldest < 0 ? -1 : Math.max(nextAt, oldest + outcomeBoundMs);
    }

    /**
     * Why the sidecar is to be left (its pending writes overdue by {@code outcomeBoundMs} while the worker's producer
     * wrote within {@code answerBoundMs}), or null; {@code sidecar} names it in the lines.
     */
    String leave(long now, long outcomeBoundMs, long answerBoundMs, String sidecar) {
        if (backAt >= 0) {
            return leaveIfStillPending(now, outcomeBoundMs, answerBoundMs, sidecar);
        }
        if (asked == null) {
            if (now < nextAt) {
                return null;
            }
            overdue = router.pendingSince(now - outcomeBoundMs);
            if (overdue.isEmpty()) {
                return null;
            }
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
        boolean wrote = asked.getNow(false);
        asked = null;
        nextAt = now + outcomeBoundMs;
        if (wrote && awayForEveryone) {
            // Kafka is back for everyone: the sidecar's held writes go as the worker's probe does, but their outcomes
            // come only on its next answer. It is left only if they are still without one after the answer bound.
            backAt = now;
            return leaveIfStillPending(now, outcomeBoundMs, answerBoundMs, sidecar);
        }
        String what = overdueLine(overdue, outcomeBoundMs, sidecar);
        if (wrote) {
            return what + ", while the worker's own producer wrote to their partitions: it cannot reach Kafka, or keeps "
                    + "from the agent what became of them";
        }
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
    private String leaveIfStillPending(long now, long outcomeBoundMs, long answerBoundMs, String sidecar) {
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
        return overdueLine(still, outcomeBoundMs, sidecar) + ", and " + answerBoundMs + " ms more since the worker's "
                + "own producer wrote to their partitions again after Kafka was away for everyone: it cannot reach Kafka, "
                + "or keeps from the agent what became of them";
    }

    private static String overdueLine(List<StatusUpdate> writes, long outcomeBoundMs, String sidecar) {
        return "the sidecar at " + sidecar + " has given no outcome for " + writes.size() + " write(s) (the oldest "
                + writes.get(0) + ") within its write bound and a poll (" + outcomeBoundMs + " ms), or said that their "
                + "last attempt waited out its write bound";
    }
}
