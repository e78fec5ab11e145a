package io.statusstore.agent.path;

import io.statusstore.agent.AgentLog;
import io.statusstore.agent.AgentOptions;
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
import java.util.function.LongSupplier;

/**
 * The agent's one thread: it hands the table's writes to the sidecar in order, and moves the {@link Router}
 * between paths.
 *
 * <p>Leaving the sidecar (FENCING, then DRAINING): the agent stops sending, and waits until the sidecar may no
 * longer start a write of this session ({@code lease.ms} after the agent's last request, plus a margin); only
 * then does Connect's own path write the newest unsettled write of each key. Whatever the sidecar wrote before
 * is older than what Connect then writes, so no older status can land over a newer one.
 *
 * <p>Coming back (QUIESCING): new writes wait in the table until Connect's own path is quiet — no original
 * running, every record its producer took settled, no re-send queued on its retry executor — because Connect
 * re-sends a failed write from its producer callback, forever. Only then does the sidecar get them.
 */
public final class Sender implements Runnable {
    /** Slack added to the lease for the sidecar's last write started before the lease ended, and clock skew. */
    static final long FENCE_MARGIN_MS = 1_000;
    private static final long QUIET_CHECK_MS = 1_000;
    private static final long MIN_BACKOFF_MS = 100;
    private static final long MAX_BACKOFF_MS = 2_000;
    private static final long FLUSH_POLL_MS = 50;
    /** While Connect flushes, a request's answer waits this long for the sidecar to settle what it holds. */
    static final long FLUSH_WAIT_MS = 500;

    private final AgentOptions options;
    private final Router router;
    private final SidecarClient client;
    private final ConnectPath connect;
    private final AgentMetrics metrics;
    private final String clusterId;
    private final String statusTopic;
    private final String agentId = UUID.randomUUID().toString();
    private final LongSupplier clock;

    private long lastPostAt = Long.MIN_VALUE / 2;
    // When the last request held for a flush was sent: a flush's first poll goes at once, its repeats apart.
    private long lastHeldAt = Long.MIN_VALUE / 2;
    private long awaySince = -1;
    private long backoffMs = MIN_BACKOFF_MS;
    private long nextAttemptAt;
    private long nextPollAt;
    private long nextProbeAt;
    private long quiesceDeadline;
    private long fenceUntil;
    private long stopRequestedAt = -1;
    private long connectSince = -1;
    private boolean needIdentity = true;
    private boolean finalSent;
    private boolean everOnSidecar;
    private boolean notQuietLogged;
    private String instance;
    private String lastConnectLine;
    // The sidecar's write bound (GET /): how long after its lease a write it started may still land.
    private long writeBoundMs = SidecarIdentity.UNKNOWN_WRITE_BOUND_MS;

    public Sender(AgentOptions options, Router router, SidecarClient client, ConnectPath connect,
                  AgentMetrics metrics, String clusterId, String statusTopic) {
        this(options, router, client, connect, metrics, clusterId, statusTopic, () -> System.nanoTime() / 1_000_000);
    }

    /** With the clock the sender's times are read from (monotonic ms): a test's own. */
    Sender(AgentOptions options, Router router, SidecarClient client, ConnectPath connect, AgentMetrics metrics,
           String clusterId, String statusTopic, LongSupplier clock) {
        this.clock = clock;
        this.options = options;
        this.router = router;
        this.client = client;
        this.connect = connect;
        this.metrics = metrics;
        this.clusterId = clusterId;
        this.statusTopic = statusTopic;
    }

    @Override
    public void run() {
        while (router.path() != Router.Path.STOPPED) {
            try {
                step();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            } catch (Throwable t) {
                AgentLog.warn("unexpected error in the sender (it goes on)", t);
                sleep(1_000);
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
            case DRAINING: onDraining(); break;
            default: break;
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
            if (why == null) {
                // An empty request proves the token and the agent route before anything is handed over.
                client.post(AgentRequest.encode(agentId, router.workerId(), router.ack(), options.leaseMs,
                        System.currentTimeMillis(), false, 0, Collections.<StatusUpdate>emptyList()));
                instance = identity.instance;
                writeBoundMs = identity.writeBoundMs;
                quiesceDeadline = now + options.quietTimeoutMs;
                router.toQuiescing();
                return;
            }
            line = "the sidecar at " + client.url() + " " + why;
        } catch (SidecarException e) {
            why = refuses(e) ? "refuses " + e.status : "unreachable";
            line = "the sidecar at " + client.url() + (refuses(e) ? " refuses the agent: " : " does not answer: ")
                    + e.getMessage();
        }
        if (!why.equals(lastConnectLine)) {
            lastConnectLine = why;
            AgentLog.warn(line + "; statuses stay on Connect's own path, checking again every "
                    + options.probeIntervalMs + " ms");
        }
    }

    /** An answer that waiting will not change: bad token (401, 403), no agent route (404), a request it rejects. */
    private static boolean refuses(SidecarException e) {
        return e.status == 400 || e.status == 401 || e.status == 403 || e.status == 404;
    }

    private void onQuiescing() throws InterruptedException {
        if (stopRequestedAt >= 0) {
            router.toDraining();
            return;
        }
        if (connect.quiet(QUIET_CHECK_MS)) {
            if (router.toSidecar()) {
                arrived();
            }
            return;
        }
        if (now() >= quiesceDeadline) {
            router.toDraining();
            nextProbeAt = now() + options.probeIntervalMs;
            if (notQuietLogged) {
                return;
            }
            notQuietLogged = true;
            AgentLog.warn("Connect's own status path still has writes in flight or queued to re-send after "
                    + options.quietTimeoutMs + " ms (quiet.timeout.ms): statuses stay on it; trying again in "
                    + options.probeIntervalMs + " ms");
            return;
        }
        sleep(50);
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
        awaySince = -1;
        backoffMs = MIN_BACKOFF_MS;
        needIdentity = false;
        nextAttemptAt = now;
        nextPollAt = now;
    }

    private void onSidecar() throws InterruptedException {
        long now = now();
        if (now < nextAttemptAt) {
            router.await(nextAttemptAt - now);
            return;
        }
        boolean stopping = stopRequestedAt >= 0;
        if (needIdentity) {
            SidecarIdentity identity;
            try {
                identity = client.identify();
            } catch (SidecarException e) {
                away(e);
                return;
            }
            String why = identity.mismatch(clusterId, statusTopic);
            if (why != null) {
                router.toFencing("the sidecar at " + client.url() + " now " + why);
                return;
            }
            noteInstance(identity.instance, lastPostAt);
            writeBoundMs = Math.max(writeBoundMs, identity.writeBoundMs);
            needIdentity = false;
        }
        if (stopping && router.size() == 0) {
            router.finish();
            return;
        }
        if (router.flushWaiting()) {
            nextPollAt = Math.min(nextPollAt, lastHeldAt + FLUSH_POLL_MS);
        }
        List<StatusUpdate> batch = router.takeBatch(options.batchSize, now);
        boolean poll = batch.isEmpty() && router.hasPending() && now >= nextPollAt;
        if (batch.isEmpty() && !poll && !(stopping && !finalSent)) {
            if (stopping && !router.hasUnsent()) {
                // The sidecar holds every write, told by the last request that it owns them: nothing to give Connect.
                router.finish();
                return;
            }
            long wait = router.hasPending() ? nextPollAt - now : options.probeIntervalMs;
            long release = router.nextRelease(now);
            if (release > 0) {
                wait = Math.min(wait, release - now);
            }
            router.await(Math.max(1, wait));
            return;
        }
        long previousPostAt = lastPostAt;
        lastPostAt = now;
        // Connect's flush waits for every write taken so far: the answer waits for them at the sidecar (an older
        // sidecar answers at once, and the next poll follows FLUSH_POLL_MS after this one).
        long waitMs = router.flushWaiting() && !stopping ? Math.min(FLUSH_WAIT_MS, options.readTimeoutMs / 2) : 0;
        if (waitMs > 0) {
            lastHeldAt = now;
        }
        try {
            AgentAnswer answer = client.post(AgentRequest.encode(agentId, router.workerId(), router.ack(),
                    options.leaseMs, System.currentTimeMillis(), stopping, waitMs, batch));
            noteInstance(answer.instance, previousPostAt);
            for (AgentAnswer.Item refused : router.apply(batch, answer)) {
                AgentLog.warn("the sidecar refused the status of " + refused.key + " for good: " + refused.reason);
            }
            finalSent = stopping;
            awaySince = -1;
            backoffMs = MIN_BACKOFF_MS;
            nextPollAt = router.flushWaiting() ? lastHeldAt + FLUSH_POLL_MS : now() + options.pollIntervalMs;
        } catch (SidecarException e) {
            router.returnBatch(batch);
            if (!e.reached) {
                // Refused at connect: this request renewed no lease, so the fence need not wait for it.
                lastPostAt = previousPostAt;
            }
            if (refuses(e)) {
                router.toFencing("the sidecar at " + client.url() + " refuses the agent: " + e.getMessage());
            } else {
                away(e);
            }
        }
    }

    /**
     * A sidecar instance other than the one last spoken to: the old one may live on (a pod still terminating),
     * writing what it holds of this session until its lease ends, so the keys pending there wait until then.
     * Learnt from {@code GET /} before any request after a failure; from an answer only when no failure came
     * between (then that request's items already went to the new instance: see PROTOCOL.md).
     */
    private void noteInstance(String seen, long lastPostToOld) {
        if (instance != null && !instance.equals(seen)) {
            router.sidecarRestarted(fenceAfter(lastPostToOld));
        }
        instance = seen;
    }

    /**
     * When nothing the sidecar took in a request sent at {@code postedAt} can land any more: it starts no write
     * after the session's lease, and one it started lands within its write bound (or never).
     */
    private long fenceAfter(long postedAt) {
        return postedAt + options.leaseMs + writeBoundMs + FENCE_MARGIN_MS;
    }

    /** The sidecar did not take a request: retry soon, and fall back once it has been away too long. */
    private void away(SidecarException e) {
        long now = now();
        if (awaySince < 0) {
            awaySince = now;
        }
        needIdentity = true;
        long away = now - awaySince;
        if (away >= options.fallbackAfterMs) {
            router.toFencing("the sidecar at " + client.url() + " has not taken a request for " + away
                    + " ms (fallback.after.ms=" + options.fallbackAfterMs + "; last: " + e.getMessage() + ")");
            return;
        }
        if (stopRequestedAt >= 0 && now - stopRequestedAt >= options.stopTimeoutMs) {
            router.toFencing("the worker's status store stops and the sidecar at " + client.url()
                    + " has not taken a request for " + away + " ms (last: " + e.getMessage() + ")");
            return;
        }
        long delay = e.retryAfterMs > 0 ? Math.min(e.retryAfterMs, MAX_BACKOFF_MS) : backoffMs;
        backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
        nextAttemptAt = now + delay;
    }

    private void onFencing() throws InterruptedException {
        String reason = router.takeLeaveReason();
        long now = now();
        if (reason != null) {
            metrics.switched(false);
            fenceUntil = fenceAfter(lastPostAt);
            int keys = router.size();
            AgentLog.warn("falling back to Connect's own status path: " + reason + "; " + keys
                    + " key(s) not yet settled go through Connect's producer"
                    + (fenceUntil > now ? " once the sidecar's lease ends in " + (fenceUntil - now) + " ms" : ""));
            connectSince = now;
            finalSent = false;
        }
        if (now >= fenceUntil) {
            router.toDraining();
            return;
        }
        sleep(Math.min(100, fenceUntil - now));
    }

    private void onDraining() {
        StatusUpdate next = router.nextToDrain();
        if (next == null) {
            nextProbeAt = now() + options.probeIntervalMs;
            return;
        }
        try {
            connect.write(next);
            metrics.fellBack();
        } catch (Throwable t) {
            AgentLog.warn("Connect's own store did not take the status of " + next.key + ": " + t);
        }
    }

    private long now() {
        return clock.getAsLong();
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
