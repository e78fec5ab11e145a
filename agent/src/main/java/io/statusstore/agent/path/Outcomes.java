package io.statusstore.agent.path;

import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.sidecar.AgentAnswer;
import io.statusstore.agent.sidecar.SidecarException;
import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongSupplier;

/**
 * What the sidecar's answers settle in the {@link KeyTable}, once checked against what the agent sent (rule 1); the
 * acknowledgement the agent sends back; KIP-1278's counters. An outcome is counted the first time it comes for a write
 * the agent still waits for, a write replaced in flight by a newer one of its key included (the sidecar writes both),
 * so the worker's counters say what the sidecar wrote for it. A write the sidecar gives back ({@code expired}) and the
 * agent sends again is one write: its final outcome counts once, with the attempts the sidecar spent on it before it
 * gave it back. Guarded by the {@link Router}'s lock.
 */
final class Outcomes {
    private final KeyTable table;
    private final AgentMetrics metrics;
    private final ReadBack readBack;
    /** A new seq, for a write the sidecar gives back (expired) and the agent sends again. */
    private final LongSupplier nextSeq;
    /** The key of every seq sent above the last ack: an outcome must name its seq's key. */
    private final TreeMap<Long, String> sentKeys = new TreeMap<>();
    /**
     * Per seq of a write sent again after the sidecar gave it back: the attempts the sidecar spent on its earlier
     * seqs. Forgotten with its outcome, or once the ack passes it (the write was replaced by a newer one of its key
     * before it was sent again, or went through Connect).
     */
    private final TreeMap<Long, Long> givenBackAttempts = new TreeMap<>();
    private long acked;

    Outcomes(KeyTable table, AgentMetrics metrics, ReadBack readBack, LongSupplier nextSeq) {
        this.table = table;
        this.metrics = metrics;
        this.readBack = readBack;
        this.nextSeq = nextSeq;
    }

    /** {@code u} goes to the sidecar now. */
    void sent(StatusUpdate u, long now) {
        sentKeys.put(u.seq, u.key);
        readBack.watch(u.key, now);
    }

    /**
     * Applies the sidecar's answer to a request, once it is checked against what the agent sent: an item naming a
     * seq the request did not carry (or leaving one out), an outcome naming a seq never sent or a key other than its
     * seq's, make the whole answer a failed request (nothing of it applied). A write it says it wrote is to be read
     * back by the worker's store by {@code readBackBy}. Returns the writes it refused for good (for the log, a line
     * a minute).
     */
    List<AgentAnswer.Item> apply(List<StatusUpdate> batch, AgentAnswer answer, long now, long readBackBy)
            throws SidecarException {
        String wrong = AnswerCheck.inconsistency(batch, answer, sentKeys, acked);
        if (wrong != null) {
            throw new SidecarException("answered what the agent did not ask: " + wrong, 200, -1, true, true);
        }
        Map<Long, StatusUpdate> sent = new HashMap<>();
        for (StatusUpdate u : batch) {
            sent.put(u.seq, u);
        }
        List<AgentAnswer.Item> refused = new ArrayList<>();
        for (AgentAnswer.Item item : answer.accepted) {
            StatusUpdate u = sent.get(item.seq);
            boolean awaited = table.awaits(u.seq);
            switch (item.result) {
                case "pending":
                    table.accepted(u, now);
                    metrics.handedOver();
                    break;
                case "dropped":
                    table.settledOnArrival(u);
                    metrics.dropped();
                    break;
                case "refused":
                    table.settledOnArrival(u);
                    metrics.refused();
                    refused.add(new AgentAnswer.Item(u.seq, u.key, item.result, 0, item.reason));
                    break;
                case "expired":
                    takeBack(u, item.attempts);
                    break;
                case "written":
                    table.written(u.key, u.seq, readBackBy, readBack, answer.instance);
                    count(item, awaited);
                    break;
                default:
                    table.settledOnArrival(u);
                    count(item, awaited);
            }
        }
        for (AgentAnswer.Item outcome : answer.outcomes) {
            if (outcome.seq > acked) {
                settle(outcome, readBackBy, answer.instance);
            }
        }
        return refused;
    }

    /**
     * The highest outcome seq the agent can acknowledge: below the lowest write it still waits for (so the sidecar
     * never forgets an outcome the agent waits for), or every seq so far ({@code lastSeq}) when it waits for none.
     */
    long ack(long lastSeq) {
        long lowest = table.lowestUnsettledSeq();
        long ack = lowest < 0 ? lastSeq : lowest - 1;
        if (ack > acked) {
            sentKeys.headMap(ack, true).clear();
            givenBackAttempts.headMap(ack, true).clear();
            acked = ack;
        }
        return ack;
    }

    private void settle(AgentAnswer.Item outcome, long readBackBy, String instance) {
        boolean awaited = table.awaits(outcome.seq);
        if (outcome.result.equals("expired")) {
            StatusUpdate u = table.pending(outcome.key, outcome.seq);
            if (u != null) {
                takeBack(u, outcome.attempts);
            }
        } else if (outcome.result.equals("written")) {
            table.written(outcome.key, outcome.seq, readBackBy, readBack, instance);
            count(outcome, awaited);
        } else {
            table.settle(outcome.key, outcome.seq);
            count(outcome, awaited);
        }
        table.outcomeCame(outcome.seq);
    }

    /** The sidecar gave {@code u} back after {@code attempts}: the same write goes again under a new seq. */
    private void takeBack(StatusUpdate u, long attempts) {
        StatusUpdate again = u.withSeq(nextSeq.getAsLong());
        long spent = givenBackAttempts.getOrDefault(u.seq, 0L) + attempts;
        givenBackAttempts.remove(u.seq);
        if (table.takeBack(u, again) && spent > 0) {
            givenBackAttempts.put(again.seq, spent);
        }
    }

    /**
     * KIP-1278's counters take an outcome once: when it comes for a write the agent waited for, with the attempts
     * the sidecar spent on the write before it gave it back, if it did.
     */
    private void count(AgentAnswer.Item outcome, boolean awaited) {
        Long before = givenBackAttempts.remove(outcome.seq);
        if (awaited) {
            metrics.outcome(outcome.result, outcome.attempts + (before != null ? before : 0));
        }
    }
}
