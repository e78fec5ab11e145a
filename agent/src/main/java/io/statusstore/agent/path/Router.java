package io.statusstore.agent.path;

import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.sidecar.AgentAnswer;
import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Which path each status write takes, and the table of writes not yet settled: the one lock worker threads
 * and the sender share. Worker threads only call {@link #offer}, which never waits on I/O.
 *
 * <pre>
 *   CONNECT ---(the right sidecar answers)---> QUIESCING ---(Connect's own path quiet)---> SIDECAR
 *      ^                                           |                                        |
 *      |                       (not quiet in time, | stop, table full)     (away too long,  | table full,
 *      |                                           v                        wrong sidecar,  v refused, stop)
 *      +-------------(table empty)------------ DRAINING <------(the lease ended)------- FENCING
 * </pre>
 * On CONNECT (and STOPPED, once the store stopped) the worker's own methods run. On every other path writes
 * enter the table; a write of a key not in a full table runs the original at once, which is safe because
 * nothing of that key is unsettled at the sidecar (on SIDECAR it starts the fall back, on QUIESCING it ends
 * the quiescing).
 */
public final class Router {
    /** The paths, as in the diagram above. */
    public enum Path { CONNECT, QUIESCING, SIDECAR, FENCING, DRAINING, STOPPED }

    private final KeyTable table;
    private final AgentMetrics metrics;
    private final int maxKeys;
    private Path path = Path.CONNECT;
    private long lastSeq;
    private String workerId;
    private String leaveReason;
    private boolean stopRequested;
    private int flushWaiters;
    private long counted;
    private final Set<Long> countedOutcomes = new HashSet<>();

    public Router(int maxKeys, AgentMetrics metrics) {
        this.table = new KeyTable(maxKeys);
        this.maxKeys = maxKeys;
        this.metrics = metrics;
        metrics.queuedKeys(this::size);
    }

    /**
     * A worker thread's write: true when the agent took it (the original method must not run), false when
     * the original must run now.
     */
    public synchronized boolean offer(StatusUpdate update) {
        if (update.workerId != null) {
            workerId = update.workerId;
        }
        if (path == Path.CONNECT || path == Path.STOPPED) {
            return false;
        }
        if (table.offer(update.withSeq(++lastSeq))) {
            if (path == Path.SIDECAR) {
                notifyAll();
            }
            return true;
        }
        if (path == Path.SIDECAR) {
            leave("the agent's table is full (max.keys=" + maxKeys + ")");
        } else if (path == Path.QUIESCING) {
            path = Path.DRAINING;
            notifyAll();
        }
        return false;
    }

    public synchronized Path path() {
        return path;
    }

    public synchronized String workerId() {
        return workerId;
    }

    public synchronized int size() {
        return table.size();
    }

    // ---- the sender's side -------------------------------------------------------------------------------

    /** Up to {@code max} unsent writes, oldest first, now sending (none unless on the sidecar path). */
    synchronized List<StatusUpdate> takeBatch(int max, long now) {
        return path == Path.SIDECAR ? table.takeBatch(max, now) : Collections.<StatusUpdate>emptyList();
    }

    /** The sidecar is a new instance: what was pending at the old one is sent again from {@code holdUntil}. */
    synchronized void sidecarRestarted(long holdUntil) {
        table.resendPending(holdUntil);
        notifyAll();
    }

    /** When the next held key may be sent, or -1. */
    synchronized long nextRelease(long now) {
        return table.nextRelease(now);
    }

    /** A request failed: its writes are unsent again (unless newer writes of their keys are). */
    synchronized void returnBatch(List<StatusUpdate> batch) {
        for (StatusUpdate u : batch) {
            table.returned(u);
        }
    }

    /** Applies the sidecar's answer to a request; returns the writes it refused for good (for one log line each). */
    synchronized List<AgentAnswer.Item> apply(List<StatusUpdate> batch, AgentAnswer answer) {
        Map<Long, StatusUpdate> sent = new HashMap<>();
        for (StatusUpdate u : batch) {
            sent.put(u.seq, u);
        }
        List<AgentAnswer.Item> refused = new ArrayList<>();
        for (AgentAnswer.Item item : answer.accepted) {
            StatusUpdate u = sent.remove(item.seq);
            if (u == null) {
                continue;
            }
            switch (item.result) {
                case "pending":
                    table.accepted(u);
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
                case "written":
                case "superseded":
                case "failed":
                    table.settledOnArrival(u);
                    count(item);
                    break;
                default:
                    table.returned(u);
            }
        }
        for (StatusUpdate u : sent.values()) {
            table.returned(u);
        }
        for (AgentAnswer.Item outcome : answer.outcomes) {
            table.settle(outcome.key, outcome.seq);
            count(outcome);
        }
        notifyAll();
        return refused;
    }

    /**
     * The highest outcome seq the agent can acknowledge: below the lowest write still unsettled (so the sidecar
     * never forgets an outcome the agent still waits for), or every seq so far when nothing is unsettled.
     */
    synchronized long ack() {
        long lowest = table.lowestUnsettledSeq();
        long ack = lowest < 0 ? lastSeq : lowest - 1;
        if (ack > counted) {
            countedOutcomes.removeIf(seq -> seq <= ack);
            counted = ack;
        }
        return ack;
    }

    synchronized boolean hasPending() {
        return table.hasPending();
    }

    synchronized boolean hasUnsent() {
        return table.hasUnsent();
    }

    synchronized void toQuiescing() {
        if (path == Path.CONNECT) {
            path = Path.QUIESCING;
        }
    }

    /** Connect's path went quiet: hand over from now on. Returns false if the path changed meanwhile. */
    synchronized boolean toSidecar() {
        if (path != Path.QUIESCING) {
            return false;
        }
        path = Path.SIDECAR;
        notifyAll();
        return true;
    }

    /** Leaves the sidecar (if on it) for the fence, with the reason the sender logs. */
    synchronized void toFencing(String reason) {
        if (path == Path.SIDECAR) {
            leave(reason);
        }
    }

    /** The reason the path left the sidecar, once (the sender logs it). */
    synchronized String takeLeaveReason() {
        String reason = leaveReason;
        leaveReason = null;
        return reason;
    }

    synchronized void toDraining() {
        if (path == Path.FENCING || path == Path.QUIESCING) {
            path = Path.DRAINING;
        }
    }

    /**
     * The next write Connect's own path must make (the newest of the key whose newest is oldest), or null when
     * the table is empty: the path is then CONNECT (or STOPPED when the store stops).
     */
    synchronized StatusUpdate nextToDrain() {
        StatusUpdate next = table.takeOldest();
        if (next == null) {
            path = stopRequested ? Path.STOPPED : Path.CONNECT;
            notifyAll();
        }
        return next;
    }

    /** Waits until a write arrives, the path changes, or {@code ms} pass. */
    synchronized void await(long ms) throws InterruptedException {
        if (ms > 0) {
            wait(ms);
        }
    }

    // ---- stop and flush ---------------------------------------------------------------------------------

    public synchronized void requestStop() {
        stopRequested = true;
        notifyAll();
    }

    synchronized boolean stopRequested() {
        return stopRequested;
    }

    /** Ends the agent's part: from now on every write runs Connect's own method. */
    public synchronized void finish() {
        path = Path.STOPPED;
        notifyAll();
    }

    /** Waits up to {@code ms} for {@link Path#STOPPED}; returns the keys still unsettled. */
    public synchronized int awaitStopped(long ms) throws InterruptedException {
        long deadline = System.nanoTime() + ms * 1_000_000;
        while (path != Path.STOPPED) {
            long left = (deadline - System.nanoTime()) / 1_000_000;
            if (left <= 0) {
                break;
            }
            wait(left);
        }
        return path == Path.STOPPED ? 0 : table.size();
    }

    /** Waits up to {@code ms} for every write taken so far to be settled; returns whether all were. */
    public synchronized boolean awaitSettled(long ms) throws InterruptedException {
        long deadline = System.nanoTime() + ms * 1_000_000;
        flushWaiters++;
        notifyAll();
        try {
            while (!table.isEmpty()) {
                long left = (deadline - System.nanoTime()) / 1_000_000;
                if (left <= 0) {
                    return false;
                }
                wait(left);
            }
            return true;
        } finally {
            flushWaiters--;
        }
    }

    synchronized boolean flushWaiting() {
        return flushWaiters > 0;
    }

    private void leave(String reason) {
        path = Path.FENCING;
        leaveReason = reason;
        notifyAll();
    }

    private void count(AgentAnswer.Item outcome) {
        if (outcome.seq > counted && countedOutcomes.add(outcome.seq)) {
            metrics.outcome(outcome.result, outcome.attempts);
        }
    }
}
