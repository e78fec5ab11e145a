package io.statusstore.agent.path;

import io.statusstore.agent.AgentLog;
import io.statusstore.agent.AgentOptions;
import io.statusstore.agent.Warnings;
import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.sidecar.AgentAnswer;
import io.statusstore.agent.sidecar.AgentRequest;
import io.statusstore.agent.sidecar.SidecarClient;
import io.statusstore.agent.sidecar.SidecarException;
import io.statusstore.agent.sidecar.SidecarIdentity;
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
 * ({@link #fenceAfter}: the sidecar starts no write of the session after its lease, and one it started lands
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
    static final long FENCE_MARGIN_MS = 1_000;
    /**
     * New writes go only in a request to a sidecar that answered this recently; otherwise a poll goes first. So a
     * sidecar that hung while the agent was idle is found out by a request that carries no write, and the writes
     * waiting meanwhile take Connect's path at once, instead of waiting out the fence of a request that may have
     * reached it.
     */
    static final long LIVE_MS = 250;
    /** While Connect flushes, a request's answer waits this long for the sidecar to settle what it holds. */
    static final long FLUSH_WAIT_MS = 500;
    private static final long QUIET_CHECK_MS = 1_000;
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
    private final Warnings warnings = new Warnings();
    private final OverdueCheck overdue;

    /** When the last request that may have reached the sidecar was sent (ms). */
    private long lastPostAt = Long.MIN_VALUE / 2;
    private long lastAnswerAt = Long.MIN_VALUE / 2;
    private long nextPollAt;
    private long nextProbeAt;
    private long quiesceDeadline;
    private long stopRequestedAt = -1;
    private long connectSince = -1;
    private boolean finalSent;
    private boolean everOnSidecar;
    private boolean notQuietLogged;
    private String instance;
    /** An instance that answered what the agent cannot believe (rule 1): not given statuses again. */
    private String distrusted;
    private String lastConnectLine;
    // The sidecar's write bound (GET /): how long after its lease a write it started may still land.
    private long writeBoundMs = SidecarIdentity.UNKNOWN_WRITE_BOUND_MS;

    public Sender(AgentOptions options, Router router, SidecarClient client, ConnectPath connect,
                  AgentMetrics metrics, String clusterId, String statusTopic) {
        this.options = options;
        this.router = router;
        this.client = client;
        this.connect = connect;
        this.metrics = metrics;
        this.clusterId = clusterId;
        this.statusTopic = statusTopic;
        this.overdue = new OverdueCheck(router, connect, warnings);
    }

    @Override
    public void run() {
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
            case CONNECT: onConnect(); break;
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
        router.toFencing("a step of the agent's sender failed (" + t + ")");
        pause(FAILED_STEP_PAUSE_MS);
    }

    /**
     * The thread ends with the path not stopped (interrupted, or an error its loop could not catch): it hands every
     * key to Connect's path through the fence itself, and from then on every write runs Connect's own method.
     */
    private void ended() {
        Thread.interrupted();
        router.orphan();
        router.toFencing("the agent's sender thread ends");
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

    private void onConnect() throws InterruptedException {
        if (stopRequestedAt >= 0) {
            router.finish();
            return;
        }
        long now = now();
        if (connectSince < 0) {
            connectSince = now;
        }
        if (now < nextProbeAt) {
            router.await(nextProbeAt - now);
            return;
        }
        nextProbeAt = now + options.probeIntervalMs;
        String why;
        String line;
        try {
            SidecarIdentity identity = client.identify();
            why = identity.mismatch(clusterId, statusTopic);
            if (why == null && identity.instance.equals(distrusted)) {
                why = "(instance " + distrusted + ") answered what the agent cannot believe: it gets no statuses "
                        + "until it restarts as a new instance";
            }
            if (why == null) {
                // Its cache has read the status topic to its end (put_safe is judged against it), and an empty
                // request proves the token and the agent route, before anything is handed over.
                client.ready();
                instance = identity.instance;
                List<StatusUpdate> none = Collections.emptyList();
                router.apply(none, checked(client.post(AgentRequest.encode(agentId, router.workerId(), instance,
                        router.ack(), options.leaseMs, System.currentTimeMillis(), false, 0, none))), now, now);
                writeBoundMs = identity.writeBoundMs;
                quiesceDeadline = now + options.quietTimeoutMs;
                router.toQuiescing();
                return;
            }
            line = "the sidecar at " + client.url() + " " + why;
        } catch (SidecarException e) {
            why = refuses(e) ? "refuses " + e.status : e.status == 503 ? "not ready" : "unreachable";
            line = "the sidecar at " + client.url() + (refuses(e) ? " refuses the agent: " : " does not take "
                    + "statuses: ") + e.getMessage();
        }
        if (!why.equals(lastConnectLine)) {
            // A reason that changes back and forth is still one line a minute per reason.
            lastConnectLine = why;
            warnings.warn("probe " + why, line + "; statuses stay on Connect's own path, checking again every "
                    + options.probeIntervalMs + " ms");
        }
    }

    /** An answer that waiting will not change: bad token (401, 403), no agent route (404), a request it rejects. */
    private static boolean refuses(SidecarException e) {
        return e.status == 400 || e.status == 401 || e.status == 403 || e.status == 404;
    }

    /** Whether the sidecar refused a whole request, taking nothing of it (PROTOCOL.md: 400, 401, 409, 503). */
    private static boolean tookNothing(SidecarException e) {
        return !e.reached || refuses(e) || e.status == 409 || e.status == 503;
    }

    private void onQuiescing() {
        if (stopRequestedAt >= 0) {
            router.toFencing("the worker's status store stops");
            return;
        }
        if (connect.quiet(QUIET_CHECK_MS)) {
            if (router.toSidecar()) {
                arrived();
            }
            return;
        }
        if (now() >= quiesceDeadline) {
            router.toFencing("Connect's own path is not quiet");
            nextProbeAt = now() + options.probeIntervalMs;
            if (notQuietLogged) {
                return;
            }
            notQuietLogged = true;
            warnings.warn("not quiet", "Connect's own status path still has writes in flight or queued to re-send "
                    + "after " + options.quietTimeoutMs + " ms (quiet.timeout.ms): statuses stay on it; trying again in "
                    + options.probeIntervalMs + " ms");
            return;
        }
        pause(50);
    }

    private void arrived() {
        long now = now();
        metrics.switched(true);
        String where = client.url() + " (instance " + instance + ", cluster " + clusterId + ", topic '"
                + statusTopic + "')";
        AgentLog.info(everOnSidecar
                ? "back on the sidecar at " + where + " after " + (now - connectSince) + " ms on Connect's own path"
                : "handing the worker's statuses to the sidecar at " + where);
        everOnSidecar = true;
        notQuietLogged = false;
        connectSince = -1;
        lastConnectLine = null;
        lastAnswerAt = now;
        nextPollAt = now;
    }

    private void onSidecar() throws InterruptedException {
        long now = now();
        boolean stopping = stopRequestedAt >= 0;
        if (stopping && router.size() == 0) {
            router.finish();
            return;
        }
        StatusUpdate unseen = router.verify(now);
        if (unseen != null) {
            distrusted = instance;
            router.toFencing("the sidecar at " + client.url() + " said it wrote the status of " + unseen.key + " (#"
                    + unseen.seq + ") but the worker's own store has not read it back within " + readBackMs()
                    + " ms: it is not believed");
            return;
        }
        String overdueWhy = overdue.leave(now, outcomeBoundMs(), readBackMs(), client.url());
        if (overdueWhy != null) {
            router.toFencing(overdueWhy);
            return;
        }
        if (router.flushWaiting()) {
            nextPollAt = Math.min(nextPollAt, lastPostAt + FLUSH_POLL_MS);
        }
        boolean live = now - lastAnswerAt <= LIVE_MS;
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
            for (long at : new long[] {router.nextRelease(now), router.nextVerifyDeadline()}) {
                if (at > 0) {
                    wait = Math.min(wait, at - now + 1);
                }
            }
            router.await(Math.max(1, wait));
            return;
        }
        request(batch, stopping);
    }

    /** One request: its answer applied, or the sidecar left at once (rule 3). */
    private void request(List<StatusUpdate> batch, boolean stopping) {
        long now = now();
        // The lease the request asks for runs from this wall-clock time, the fence from this monotonic one: taken
        // together, so that the fence never starts earlier than the lease.
        long sentAtMs = System.currentTimeMillis();
        long previousPostAt = lastPostAt;
        lastPostAt = now;
        router.posting(fenceAfter(now));
        // Connect's flush waits for every write taken so far: the answer waits for them at the sidecar (an older
        // sidecar answers at once, and the next poll follows FLUSH_POLL_MS after this one).
        long waitMs = router.flushWaiting() && !stopping ? Math.min(FLUSH_WAIT_MS, options.readTimeoutMs / 2) : 0;
        try {
            AgentAnswer answer = checked(client.post(AgentRequest.encode(agentId, router.workerId(), instance,
                    router.ack(), options.leaseMs, sentAtMs, stopping, waitMs, batch)));
            long answered = now();
            for (AgentAnswer.Item refused : router.apply(batch, answer, answered, answered + readBackMs())) {
                warnings.warn("refused " + refused.key, "the sidecar refused the status of " + refused.key
                        + " for good: " + refused.reason);
            }
            finalSent = stopping;
            lastAnswerAt = now();
            nextPollAt = router.flushWaiting() ? lastPostAt + FLUSH_POLL_MS : lastAnswerAt + options.pollIntervalMs;
        } catch (SidecarException e) {
            if (!e.reached || e.status == 409) {
                // Refused at connect, or by another instance: it renewed no lease, so the fence need not wait for it.
                lastPostAt = previousPostAt;
                router.posting(fenceAfter(previousPostAt));
            }
            if (e.status == 409 && restarted(batch, previousPostAt)) {
                return;
            }
            if (tookNothing(e)) {
                router.returnBatch(batch);
            }
            // Otherwise the batch stays "sending": it may have reached the sidecar, and its keys wait for the fence.
            if (e.malformed) {
                distrusted = instance;
            }
            router.toFencing("the sidecar at " + client.url() + (refuses(e) ? " refuses the agent: "
                    : e.malformed ? " cannot be believed: " : " is away: ") + e.getMessage());
        }
    }

    /** An answer from the instance the request named, or a failed request: another one must not have taken it. */
    private AgentAnswer checked(AgentAnswer answer) throws SidecarException {
        if (!answer.instance.equals(instance)) {
            throw new SidecarException("answered as instance " + answer.instance + " a request to instance " + instance,
                    200, -1, true, true);
        }
        return answer;
    }

    /**
     * Another instance refused the request (409, nothing taken): the sidecar restarted. The old instance may live on
     * (a pod still terminating), writing what it holds of this session until its lease ends, so the keys pending
     * there are sent to the new one only after that. Returns false when the new one is not one to hand writes to.
     */
    private boolean restarted(List<StatusUpdate> batch, long lastPostToOld) {
        router.returnBatch(batch);
        try {
            SidecarIdentity identity = client.identify();
            if (identity.mismatch(clusterId, statusTopic) != null || identity.instance.equals(instance)) {
                return false;
            }
            AgentLog.info("the sidecar at " + client.url() + " restarted (instance " + identity.instance + ", was "
                    + instance + "): what was pending at the old instance goes to the new one once the old one's lease "
                    + "and write bound have passed");
            instance = identity.instance;
            writeBoundMs = Math.max(writeBoundMs, identity.writeBoundMs);
            router.sidecarRestarted(fenceAfter(lastPostToOld));
            lastAnswerAt = now();
            return true;
        } catch (SidecarException e) {
            return false;
        }
    }

    /** How long a write may be pending at the sidecar without an outcome (rule 5): its write bound, a poll, a margin. */
    private long outcomeBoundMs() {
        return writeBoundMs + options.pollIntervalMs + FENCE_MARGIN_MS;
    }

    /**
     * How long after the sidecar says it wrote a status the worker's own store must have read it back (rule 4): its
     * write bound (a write it reports was acknowledged; the margin covers the worker's reading) and the margin.
     */
    private long readBackMs() {
        return writeBoundMs + FENCE_MARGIN_MS;
    }

    /**
     * When nothing the sidecar took in a request sent at {@code postedAt} can land any more: it starts no write
     * after the session's lease, and one it started lands within its write bound (or never).
     */
    private long fenceAfter(long postedAt) {
        return postedAt + options.leaseMs + writeBoundMs + FENCE_MARGIN_MS;
    }

    private void onFencing() throws InterruptedException {
        String reason = router.takeLeaveReason();
        long now = now();
        if (reason != null) {
            metrics.switched(false);
            long fence = router.nextFence(now);
            AgentLog.warn("falling back to Connect's own status path: " + reason + "; of " + router.size()
                    + " key(s) not yet settled, those with nothing at the sidecar go through Connect's producer now"
                    + (fence > now ? ", the others once nothing the sidecar took of them can land, in "
                    + (fence - now) + " ms" : ""));
            connectSince = now;
            finalSent = false;
        }
        StatusUpdate next = router.takeReady(now);
        if (next != null) {
            try {
                connect.write(next);
                metrics.fellBack();
            } catch (Throwable t) {
                warnings.warn("connect write " + t.getClass().getName(), "Connect's own store did not take the status "
                        + "of " + next.key + ": " + t);
            } finally {
                router.drained(next);
            }
            return;
        }
        if (router.path() != Router.Path.FENCING) {
            nextProbeAt = now + options.probeIntervalMs;
            return;
        }
        long fence = router.nextFence(now);
        router.await(fence < 0 ? FAILED_STEP_PAUSE_MS : Math.min(fence - now, FAILED_STEP_PAUSE_MS));
    }

    private static long now() {
        return System.nanoTime() / 1_000_000;
    }

    private static void pause(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
