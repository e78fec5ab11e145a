package io.statusstore.agent.path;

import io.statusstore.agent.AgentOptions;
import io.statusstore.agent.Warnings;
import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.sidecar.AgentAnswer;
import io.statusstore.agent.sidecar.AgentRequest;
import io.statusstore.agent.sidecar.SidecarClient;
import io.statusstore.agent.sidecar.SidecarException;
import io.statusstore.agent.status.StatusUpdate;

import java.util.Collections;
import java.util.List;
import java.util.UUID;

/**
 * The agent's one thread: it hands the table's writes to the sidecar in order, and moves the {@link Router}
 * between paths (agent/PROTOCOL.md states the rules; the numbers below are theirs).
 *
 * <p>Leaving the sidecar (FENCING) happens at once when the sidecar is known away (rule 3): a refused connection,
 * no valid answer within the request's deadline, a refusal, a 503. A key with nothing at the sidecar takes
 * Connect's own path at once; a key with a write there waits until nothing the sidecar took of it can land
 * ({@link Handover#fenceAfter}: the sidecar starts no write of the session after its lease, and one it started lands
 * within its write bound, or never), then its newest write goes through Connect. So no older status of the
 * sidecar's can land over a newer one of Connect's.
 *
 * <p>Coming back (QUIESCING): new writes wait in the table until Connect's own path is quiet — no original
 * running, every record its producer took settled, no re-send queued on its retry executor — because Connect
 * re-sends a failed write from its producer callback, forever. Only then does the sidecar get them.
 *
 * <p>A step that throws, or the thread's end, moves the worker to Connect's path through the fence (rule 7).
 */
public final class Sender implements Runnable {
    /** Slack added to the fence for the sidecar's last write started before the lease ended, and clock skew. */
    public static final long FENCE_MARGIN_MS = 1_000;
    /**
     * New writes go only in a request to a sidecar that answered this recently; otherwise a poll goes first. So a
     * sidecar that hung while the agent was idle is found out by a request that carries no write, and the writes
     * waiting meanwhile take Connect's path at once, instead of waiting out the fence of a request that may have
     * reached it.
     */
    static final long LIVE_MS = 250;
    /**
     * A request that carries writes, or polls for pending ones, asks its answer to wait this long (an eighth of the
     * read timeout at most, so that a sidecar slow to answer is not taken for one away) for the sidecar to settle
     * what the session has there: the outcome of a write comes on the answer to the request that carried it, as soon
     * as Kafka acknowledged it, not a poll interval later. So a key is left with a write whose outcome the agent has
     * not heard (which waits for its fence should the sidecar go away, rule 3) only while Kafka takes to write it.
     */
    static final long OUTCOME_WAIT_MS = 250;
    /**
     * A write taken while no request is in flight waits this long for the ones that come with it, so that they go in
     * one request: Connect writes a resumed connector's status and its tasks' within a millisecond or two of each other
     * (a revocation its tasks' likewise), and a write that misses a request waits for that request's answer (which
     * it wakes, {@link Wakes}, instead of waiting for Kafka's acknowledgement of what that request carried,
     * {@link #OUTCOME_WAIT_MS}): a round trip more. A stock worker's producer
     * lingers too (linger.ms, 5 ms since Kafka 4.0). Not while Connect flushes or the store stops: what is taken then
     * goes at once, and so do the writes taken while a request was in flight.
     */
    static final long GATHER_MS = 2;
    /** While Connect flushes, a request's answer waits this long (half the read timeout at most) for the outcomes. */
    static final long FLUSH_WAIT_MS = 500;
    /** The lease of the request that ends the session's lease on leaving a sidecar that still answers (1 ms). */
    static final long LEASE_ENDED_MS = 1;
    private static final long FLUSH_POLL_MS = 50;
    private static final long FAILED_STEP_PAUSE_MS = 100;

    private final AgentOptions options;
    private final Router router;
    private final SidecarClient client;
    private final ConnectPath connect;
    private final AgentMetrics metrics;
    private final String clusterId;
    private final String statusTopic;
    private final String agentId = UUID.randomUUID().toString();
    private final Warnings warnings;
    private final OverdueCheck overdue;
    private final Handover handover;
    private final Wakes wakes;

    /** When the last request that may have reached the sidecar was sent (ms). */
    private long lastPostAt = Long.MIN_VALUE / 2;
    private long lastAnswerAt = Long.MIN_VALUE / 2;
    /** When the last request held for a flush was sent: a flush's first poll goes at once, its repeats apart. */
    private long lastHeldAt = Long.MIN_VALUE / 2;
    private long nextPollAt;
    private long stopRequestedAt = -1;
    /** Until when (ms) a fresh store's first writes wait for the first exchange, which ends by then. */
    private long startingUntil = Long.MAX_VALUE;
    private boolean finalSent;
    /**
     * Leaving a sidecar that answered the end of the session's lease: until when (its fence) the agent asks it for the
     * outcomes of the writes whose attempt may still be under way there ({@link #askOutcomes}), or MIN_VALUE.
     */
    private long askOutcomesUntil = Long.MIN_VALUE;
    private long nextAskAt;
    /** How long a write taken while no request is in flight waits for more ({@link #GATHER_MS}; tests set it). */
    long gatherMs = GATHER_MS;
    /** Whether the unsent writes have their wait for more set ({@link #gatherUntilNs}). */
    private boolean gathering;
    /** Until when (System.nanoTime) the unsent writes wait for more. */
    private long gatherUntilNs;

    /** {@code warnings}: the agent's, shared with what else warns for the worker's store (one limit per cause). */
    public Sender(AgentOptions options, Router router, SidecarClient client, ConnectPath connect,
                  AgentMetrics metrics, Warnings warnings, String clusterId, String statusTopic) {
        this.options = options;
        this.router = router;
        this.client = client;
        this.connect = connect;
        this.metrics = metrics;
        this.warnings = warnings;
        this.clusterId = clusterId;
        this.statusTopic = statusTopic;
        this.overdue = new OverdueCheck(router, connect, warnings);
        this.handover = new Handover(options, router, client, connect, metrics, warnings, clusterId, statusTopic, agentId);
        this.wakes = new Wakes(client, agentId);
    }

    @Override
    public void run() {
        // A fresh store's first writes wait for the first exchange (Router.Path.STARTING) one request deadline at most.
        startingUntil = now() + options.connectTimeoutMs + options.readTimeoutMs;
        router.startingUntil(startingUntil);
        try {
            while (router.path() != Router.Path.STOPPED) {
                try {
                    step();
                } catch (InterruptedException e) {
                    return;
                } catch (Throwable t) {
                    stepFailed(t);
                }
            }
        } finally {
            if (router.path() != Router.Path.STOPPED) {
                ended();
            }
        }
    }

    /** One turn of the loop: what the current path asks for. */
    private void step() throws InterruptedException {
        if (stopRequestedAt < 0 && router.stopRequested()) {
            stopRequestedAt = now();
        }
        switch (router.path()) {
            case STARTING: onStarting(); break;
            case CONNECT: onConnect(Long.MAX_VALUE); break;
            case QUIESCING: onQuiescing(); break;
            case SIDECAR: onSidecar(); break;
            case FENCING: onFencing(); break;
            default: break;
        }
    }

    /** A step threw: whatever it was doing, the worker's statuses take Connect's path through the fence. */
    private void stepFailed(Throwable t) {
        warnings.warn("step " + t.getClass().getName(), "a step of the agent's sender failed (" + t
                + "): statuses go through Connect's own path", t);
        router.toFencing(Leaving.Kind.STEP_FAILED, "a step of the agent's sender failed (" + t + ")");
        pause(FAILED_STEP_PAUSE_MS);
    }

    /**
     * The thread ends with the path not stopped (interrupted, or an error its loop could not catch): it hands every
     * key to Connect's path through the fence itself, and from then on every write runs Connect's own method.
     */
    private void ended() {
        Thread.interrupted();
        router.orphan();
        router.toFencing(Leaving.Kind.SENDER_ENDS, "the agent's sender thread ends");
        while (router.path() == Router.Path.FENCING) {
            try {
                onFencing();
            } catch (InterruptedException e) {
                Thread.interrupted();
            } catch (Throwable t) {
                warnings.warn("ended " + t.getClass().getName(), "handing statuses to Connect's own path failed ("
                        + t + ")", t);
                pause(FAILED_STEP_PAUSE_MS);
            }
        }
    }

    /**
     * The first exchange: the writes the store took meanwhile wait in the table. The sidecar found: they go to it (once
     * Connect's path is quiet, at once at a start); not found (or the store stops): they have nothing at the sidecar
     * and take Connect's path at once, through the fence.
     */
    private void onStarting() throws InterruptedException {
        if (stopRequestedAt < 0) {
            // The first exchange ends within the writes' bound (GET /, GET /ready and the empty request together).
            onConnect(startingUntil);
        }
        router.leaveStarting();
    }

    private void onConnect(long until) throws InterruptedException {
        if (stopRequestedAt >= 0) {
            router.finish();
            return;
        }
        handover.onConnect(until);
    }

    private void onQuiescing() {
        if (stopRequestedAt >= 0) {
            router.toFencing(Leaving.Kind.STOPS, "the worker's status store stops");
            return;
        }
        if (handover.onQuiescing()) {
            overdue.reset();
            // Its last answer was the probe's: if Connect's path took longer than LIVE_MS to go quiet since, an empty
            // request goes before the writes that waited (rule 3), as after any idle time.
            lastAnswerAt = handover.probeAnsweredAt();
            nextPollAt = now();
        }
    }

    private void onSidecar() throws InterruptedException {
        long now = now();
        boolean stopping = stopRequestedAt >= 0;
        if (stopping && router.size() == 0) {
            router.finish();
            return;
        }
        StatusUpdate unseen = unreadWritten(now);
        if (unseen != null) {
            router.toFencing(Leaving.Kind.NOT_READ_BACK, "the sidecar at " + client.url() + " said it wrote the status "
                    + "of " + unseen.key + " (#" + unseen.seq + ") but the worker's own store has not read it back within "
                    + handover.readBackMs() + " ms: it is not believed");
            return;
        }
        String overdueWhy = overdue.leave(now, handover.outcomeBoundMs(), handover.readBackMs(), client.url());
        if (overdueWhy != null) {
            endLease();
            router.toFencing(Leaving.Kind.NO_OUTCOME, overdueWhy);
            return;
        }
        if (router.flushWaiting()) {
            // A flush's first poll goes at once (the tasks' last writes went moments before); its repeats apart.
            nextPollAt = Math.min(nextPollAt, lastHeldAt + FLUSH_POLL_MS);
        }
        boolean live = now - lastAnswerAt <= LIVE_MS;
        long gatherLeft = live && !stopping && !router.flushWaiting() ? gatherLeftMs() : 0;
        if (gatherLeft > 0 && !(router.hasPending() && now >= nextPollAt)) {
            router.await(gatherLeft);
            return;
        }
        List<StatusUpdate> batch = live ? router.takeBatch(options.batchSize, now)
                : Collections.<StatusUpdate>emptyList();
        boolean poll = batch.isEmpty() && ((router.hasPending() && now >= nextPollAt) || (!live && router.hasUnsent()));
        if (batch.isEmpty() && !poll && !(stopping && !finalSent)) {
            if (stopping && !router.hasUnsent()) {
                // The sidecar holds every write, told by the last request that it owns them: nothing to give Connect.
                router.finish();
                return;
            }
            long wait = router.hasPending() ? nextPollAt - now : options.probeIntervalMs;
            for (long at : new long[] {router.nextRelease(now), router.nextVerifyDeadline(),
                    overdue.nextAt(handover.outcomeBoundMs(), handover.readBackMs())}) {
                if (at > 0) {
                    wait = Math.min(wait, at - now + 1);
                }
            }
            router.await(Math.max(1, wait));
            return;
        }
        request(batch, stopping);
    }

    /**
     * How long (ms, rounded up) the unsent writes still wait for more ({@link #GATHER_MS}), from when the sender first saw
     * them with no request in flight; 0 when they go now, or when none waits.
     */
    private long gatherLeftMs() {
        if (!router.hasUnsent()) {
            gathering = false;
            return 0;
        }
        long nowNs = System.nanoTime();
        if (!gathering) {
            gathering = true;
            gatherUntilNs = nowNs + gatherMs * 1_000_000;
        }
        long left = gatherUntilNs - nowNs;
        return left <= 0 ? 0 : (left + 999_999) / 1_000_000;
    }

    /** One request: its answer applied, or the sidecar left at once (rule 3). */
    private void request(List<StatusUpdate> batch, boolean stopping) {
        try {
            post(batch, stopping);
        } finally {
            // Writes taken while this request was in flight have waited for its answer already: they go now.
            gathering = router.hasUnsent();
            gatherUntilNs = System.nanoTime();
        }
    }

    private void post(List<StatusUpdate> batch, boolean stopping) {
        long now = now();
        // The lease the request asks for runs from this wall-clock time, the fence from this monotonic one: taken
        // together, so that the fence never starts earlier than the lease.
        long sentAtMs = System.currentTimeMillis();
        long previousPostAt = lastPostAt;
        lastPostAt = now;
        long fenceBefore = router.posting(handover.fenceAfter(now));
        // The answer waits for the outcomes of what the session has at the sidecar (OUTCOME_WAIT_MS; an older sidecar
        // answers at once). Connect's flush waits for every write taken so far: its next poll follows FLUSH_POLL_MS
        // after this one. A final request does not wait: the sidecar owns what it holds from then on.
        long waitMs = 0;
        if (!stopping && router.flushWaiting()) {
            waitMs = flushWaitMs();
            lastHeldAt = now;
        } else if (!stopping && (!batch.isEmpty() || router.hasPending())) {
            waitMs = Math.min(OUTCOME_WAIT_MS, options.readTimeoutMs / 8);
            // A write taken while this answer waits for Kafka wakes it (Wakes): it goes in the next request at once.
            router.wakeOnWrite(wakes.forRequest(handover.instance()));
        }
        try {
            AgentAnswer answer;
            try {
                answer = handover.checked(client.post(AgentRequest.encode(agentId, router.workerId(),
                        handover.instance(), router.ack(), options.leaseMs, sentAtMs, stopping, waitMs, batch)));
            } finally {
                router.wakeOnWrite(null);
            }
            long answered = now();
            for (AgentAnswer.Item refused : router.apply(batch, answer, answered, answered + handover.readBackMs())) {
                // One cause for every key: many statuses refused are a line a minute, with their count.
                warnings.warn("refused", "the sidecar refused the status of " + refused.key
                        + " for good: " + refused.reason);
            }
            // Rule 5's evidence, from the sidecar itself: those writes are overdue now, not a poll and a second later.
            router.timedOut(answer.timedOut, answered - handover.outcomeBoundMs());
            finalSent = stopping;
            lastAnswerAt = now();
            nextPollAt = router.flushWaiting() ? lastHeldAt + FLUSH_POLL_MS : lastAnswerAt + options.pollIntervalMs;
            nextPollAt = Math.min(nextPollAt, boundPollAt(lastAnswerAt));
        } catch (SidecarException e) {
            if (!e.reached || e.status == 409) {
                // Refused at connect, or by another instance: it renewed no lease, so the fence need not wait for it.
                lastPostAt = previousPostAt;
                router.notPosted(fenceBefore);
            }
            if (e.status == 409 && handover.restarted(batch, previousPostAt)) {
                // Rule 5's question so far was about writes at the old instance, sent again to the new one later.
                overdue.reset();
                lastAnswerAt = now();
                return;
            }
            if (Handover.tookNothing(e)) {
                router.returnBatch(batch);
            }
            // Otherwise the batch stays "sending": it may have reached the sidecar, and its keys wait for the fence.
            if (e.malformed) {
                handover.distrust();
            }
            String sidecar = "the sidecar at " + client.url();
            if (Handover.refuses(e)) {
                router.toFencing(Leaving.Kind.REFUSES, sidecar + " refuses the agent: " + e.getMessage());
            } else if (e.malformed) {
                router.toFencing(Leaving.Kind.NOT_BELIEVED, sidecar + " cannot be believed: " + e.getMessage());
            } else {
                router.toFencing(Leaving.Kind.AWAY, sidecar + " is away: " + e.getMessage());
            }
        }
    }

    /**
     * When to poll so that the sidecar's word on the oldest pending write comes as soon as it has one: at its write bound
     * (by then its attempt was written or timed out, and the answer says which: an outcome, or {@code timed_out}), and
     * from then on an answer wait apart until rule 5's own bound, since the producer finds a timed-out request up to a
     * second late. So the agent leaves a sidecar cut off from Kafka before the held partition's probe goes out, which
     * would hold its key for the fence. Otherwise never ({@link Long#MAX_VALUE}).
     */
    private long boundPollAt(long answeredAt) {
        long oldest = router.oldestPendingSince();
        if (oldest < 0) {
            return Long.MAX_VALUE;
        }
        long boundAt = oldest + handover.writeBoundMs();
        if (answeredAt < boundAt) {
            return boundAt;
        }
        return answeredAt < oldest + handover.outcomeBoundMs() ? answeredAt + OUTCOME_WAIT_MS : Long.MAX_VALUE;
    }

    /**
     * Leaving a sidecar that still answers (rule 5): one more request, whose lease ends a millisecond after it was
     * sent, so that the sidecar starts no write of the session from then on. Answered, the keys there wait only the
     * sidecar's write bound (and the margin) from it, not a whole lease more; not answered, the fence of the earlier
     * requests stands (this one cannot lengthen the lease). Its answer's outcomes are applied as any answer's.
     */
    private void endLease() {
        if (finalSent) {
            // A final request made the session the sidecar's, written whatever the lease: nothing ends it.
            return;
        }
        long now = now();
        try {
            long answered = postLeaseEnd(Long.MAX_VALUE);
            long fence = handover.fenceAfterLease(now, LEASE_ENDED_MS);
            router.leaseEnded(fence);
            askOutcomesUntil = fence;
            nextAskAt = answered;
        } catch (SidecarException e) {
            // The fence of the requests before it stands. An answer that cannot be checked (rule 1): as after any other
            // request, the instance gets no statuses until it restarts, though it reads its topics again.
            if (e.malformed) {
                handover.distrust();
            }
        }
    }

    /**
     * One request that ends the session's lease (a lease of 1 ms: no write taken, none renewed), within
     * {@code deadlineMs}, its answer's outcomes applied as any answer's; returns when it was answered. Its answer waits,
     * as a flush's does, for the writes in flight to settle: one whose attempt fails then is given back on it (expired),
     * not a write bound later.
     */
    private long postLeaseEnd(long deadlineMs) throws SidecarException {
        List<StatusUpdate> none = Collections.emptyList();
        AgentAnswer answer = handover.checked(client.post(AgentRequest.encode(agentId, router.workerId(),
                handover.instance(), router.ack(), LEASE_ENDED_MS, System.currentTimeMillis(), false,
                flushWaitMs(), none), deadlineMs));
        long answered = now();
        router.apply(none, answer, answered, answered + handover.readBackMs());
        return answered;
    }

    /** How long the answer to a request for a flush, or to one that ends the lease, waits for the writes in flight. */
    private long flushWaitMs() {
        return Math.min(FLUSH_WAIT_MS, options.readTimeoutMs / 2);
    }

    /**
     * After the lease ended at a sidecar that answered so: it starts no attempt of the session's writes any more, so a
     * key whose attempt there has its outcome (written, or given back when it failed) can land nothing more from it,
     * and goes through Connect at once, not at its fence (a timed-out attempt that lands late is the sidecar's to undo:
     * PROTOCOL.md, "What remains"). Each request ends the lease again (a lease of 1 ms: no write is taken, none
     * renewed) and waits, as the one that ended it did, for the attempts under way to settle. It never runs past the
     * fence, so a sidecar that stops answering holds no key longer than the fence did; a failed request ends the
     * asking, and the fence stands.
     */
    private void askOutcomes(long now) {
        long deadline = askOutcomesUntil - now;
        if (deadline <= flushWaitMs()) {
            askOutcomesUntil = Long.MIN_VALUE;
            return;
        }
        try {
            long answered = postLeaseEnd(deadline);
            router.liftSettledFences();
            nextAskAt = answered + FLUSH_POLL_MS;
        } catch (SidecarException e) {
            if (e.malformed) {
                handover.distrust();
            }
            askOutcomesUntil = Long.MIN_VALUE;
        }
    }

    /**
     * A write the sidecar said it wrote and the worker's store has not read back in time (rule 4), or null; the instance
     * that said so (an older one, if the sidecar restarted since) gets no statuses until it restarts.
     */
    private StatusUpdate unreadWritten(long now) {
        StatusUpdate unseen = router.verify(now);
        if (unseen != null) {
            handover.distrust(router.saidWrittenBy(unseen));
        }
        return unseen;
    }

    private void onFencing() throws InterruptedException {
        Leaving reason = router.takeLeaving();
        long now = now();
        // Rule 4 still holds once the agent left for another reason: such a write goes through Connect at its fence.
        unreadWritten(now);
        if (reason != null) {
            metrics.switched(false);
            long fence = router.nextFence(now);
            // Once a minute per kind of reason: a sidecar that flaps is a line a minute, with the count of switches.
            warnings.warn("switch " + reason.kind, "falling back to Connect's own status path: " + reason.why
                    + "; of " + router.size() + " key(s) not yet settled, those with nothing at the sidecar go through "
                    + "Connect's producer now"
                    + (fence > now ? ", the others once nothing the sidecar took of them can land, in "
                    + (fence - now) + " ms" : ""));
            handover.leftSidecar(now);
            finalSent = false;
            if (askOutcomesUntil > now) {
                // Said written, or given back, on the answers so far: nothing of those keys is under way there.
                router.liftSettledFences();
            }
        }
        StatusUpdate next = router.takeReady(now);
        List<StatusUpdate> abandoned = router.takeAbandoned();
        if (!abandoned.isEmpty()) {
            warnings.warn("deleted meanwhile", "not writing through Connect " + abandoned.size() + " status(es) held "
                    + "past their fence whose key the worker's store read a tombstone of since (the first "
                    + abandoned.get(0) + "): as Connect abandons such a retry, so that a deleted status stays deleted");
        }
        if (next != null) {
            try {
                if (connect.write(next)) {
                    metrics.fellBack();
                }
            } catch (Throwable t) {
                warnings.warn("connect write " + t.getClass().getName(), "Connect's own store did not take the status "
                        + "of " + next.key + ": " + t);
            } finally {
                router.drained(next);
            }
            return;
        }
        if (router.path() != Router.Path.FENCING) {
            askOutcomesUntil = Long.MIN_VALUE;
            handover.probeLater(now);
            return;
        }
        if (askOutcomesUntil > now && router.fencedInFlight()) {
            if (now >= nextAskAt) {
                askOutcomes(now);
                return;
            }
            router.await(nextAskAt - now);
            return;
        }
        long fence = router.nextFence(now);
        router.await(fence < 0 ? FAILED_STEP_PAUSE_MS : Math.min(fence - now, FAILED_STEP_PAUSE_MS));
    }

    private static long now() {
        return System.nanoTime() / 1_000_000;
    }

    static void pause(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
