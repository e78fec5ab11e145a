package io.statusstore.agent.path;

import io.statusstore.agent.Warnings;
import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Rule 5: writes pending at the sidecar past its write bound (and a poll) without an outcome. The worker's own
 * producer is asked whether it can write to their partitions: if it can, the sidecar cannot, or keeps from the agent
 * what became of them, and is to be left; if it cannot either, Kafka is away for everyone and the statuses stay with
 * the sidecar, which holds them and probes cheaply (falling back would be the stock worker's storm of re-sends, and
 * its stale keys); asked again after another bound. Used by the sender's thread only.
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
        nextAt = 0;
        overdue = Collections.emptyList();
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
        long oldest = router.oldestPendingSince();
        return oldest < 0 ? -1 : Math.max(nextAt, oldest + outcomeBoundMs);
    }

    /**
     * Why the sidecar is to be left (its pending writes overdue by {@code outcomeBoundMs} while the worker's producer
     * wrote within {@code answerBoundMs}), or null; {@code sidecar} names it in the lines.
     */
    String leave(long now, long outcomeBoundMs, long answerBoundMs, String sidecar) {
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
        String what = "the sidecar at " + sidecar + " has given no outcome for " + overdue.size() + " write(s) (the "
                + "oldest " + overdue.get(0) + ") within its write bound and a poll (" + outcomeBoundMs + " ms)";
        if (wrote) {
            return what + ", while the worker's own producer wrote to their partitions: it cannot reach Kafka, or keeps "
                    + "from the agent what became of them";
        }
        warnings.warn("kafka away", what + ", and the worker's own producer could not write to their partitions "
                + "either (" + (late ? "no answer within " + answerBoundMs + " ms" : "it failed") + "): Kafka is away "
                + "for everyone, the statuses stay with the sidecar");
        return null;
    }
}
