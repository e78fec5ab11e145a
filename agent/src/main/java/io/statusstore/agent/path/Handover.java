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
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Which sidecar the {@link Sender} hands statuses to, and getting there: the probe on Connect's path (the right
 * cluster and status topic, ready, an instance the agent believes, an empty request taken), the wait for Connect's
 * own path to go quiet, a restarted instance; and the bounds that follow from that sidecar's write bound (the fence,
 * rules 4 and 5). Used by the sender's thread alone.
 */
final class Handover {
    private static final long QUIET_CHECK_MS = 1_000;
    /** Instances distrusted that are remembered (each a few dozen bytes). */
    static final int DISTRUSTED_KEPT = 64;

    private final AgentOptions options;
    private final Router router;
    private final SidecarClient client;
    private final ConnectPath connect;
    private final AgentMetrics metrics;
    private final Warnings warnings;
    private final String clusterId;
    private final String statusTopic;
    private final String agentId;

    private long nextProbeAt;
    private long quiesceDeadline;
    private long connectSince = -1;
    private boolean everOnSidecar;
    /** Whether the line on Connect's path not being quiet was logged since the agent was last on the sidecar. */
    private boolean notQuietSaid;
    /** The probe's reason last logged since the agent was last on the sidecar, or null. */
    private String saidWhy;
    private String instance;
    /** When the probe's empty request was last answered (ms): writes go only to a sidecar that answered just before. */
    private long probeAnsweredAt = Long.MIN_VALUE / 2;
    /**
     * The instances that answered what the agent cannot believe (rule 1), newest last: not given statuses again. An
     * instance is new at each start of a sidecar, so the last {@value #DISTRUSTED_KEPT} are kept.
     */
    private final Set<String> distrusted = new LinkedHashSet<>();
    // The sidecar's write bound (GET /): how long after its lease a write it started may still land.
    private long writeBoundMs = SidecarIdentity.UNKNOWN_WRITE_BOUND_MS;

    Handover(AgentOptions options, Router router, SidecarClient client, ConnectPath connect, AgentMetrics metrics,
             Warnings warnings, String clusterId, String statusTopic, String agentId) {
        this.options = options;
        this.router = router;
        this.client = client;
        this.connect = connect;
        this.metrics = metrics;
        this.warnings = warnings;
        this.clusterId = clusterId;
        this.statusTopic = statusTopic;
        this.agentId = agentId;
    }

    /** The sidecar instance the agent writes to. */
    String instance() {
        return instance;
    }

    /** The instance written to answered what the agent cannot believe: it gets no statuses until it restarts. */
    void distrust() {
        distrust(instance);
    }

    /**
     * {@code said} (the instance that said it wrote a status the worker's store never read back, rule 4; null: the
     * current one) gets no statuses until it restarts.
     */
    void distrust(String said) {
        String caught = said != null ? said : instance;
        if (caught != null && distrusted.add(caught) && distrusted.size() > DISTRUSTED_KEPT) {
            Iterator<String> oldest = distrusted.iterator();
            oldest.next();
            oldest.remove();
        }
    }

    /**
     * When the probe's empty request was answered (ms): the last answer of the sidecar the agent arrives at, however
     * long Connect's own path took to go quiet since.
     */
    long probeAnsweredAt() {
        return probeAnsweredAt;
    }

    /** The agent left the sidecar at {@code now} (for the line saying how long it was away when it is back). */
    void leftSidecar(long now) {
        connectSince = now;
    }

    /** Connect's path from {@code now}: the sidecar is asked again a probe interval later. */
    void probeLater(long now) {
        nextProbeAt = now + options.probeIntervalMs;
    }

    /**
     * A step on CONNECT (or STARTING): the sidecar is asked, every probe interval, whether it takes statuses now; its
     * calls end by {@code until} (ms; on STARTING, the bound of the first writes' wait), each within its own deadline.
     */
    void onConnect(long until) throws InterruptedException {
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
        boolean asked = false;
        try {
            SidecarIdentity identity = client.identify(left(until));
            why = identity.mismatch(clusterId, statusTopic);
            if (why == null && distrusted.contains(identity.instance)) {
                why = "(instance " + identity.instance + ") answered what the agent cannot believe: it gets no statuses "
                        + "until it restarts as a new instance";
            }
            if (why == null) {
                // Its cache has read the status topic to its end (put_safe is judged against it), and an empty
                // request proves the token and the agent route, before anything is handed over.
                client.ready(left(until));
                instance = identity.instance;
                asked = true;
                List<StatusUpdate> none = Collections.emptyList();
                router.apply(none, checked(client.post(AgentRequest.encode(agentId, router.workerId(), instance,
                        router.ack(), options.leaseMs, System.currentTimeMillis(), false, 0, none), left(until))),
                        now, now);
                probeAnsweredAt = now();
                writeBoundMs = identity.writeBoundMs;
                quiesceDeadline = now + options.quietTimeoutMs;
                router.toQuiescing();
                return;
            }
            line = "the sidecar at " + client.url() + " " + why;
        } catch (SidecarException e) {
            boolean unbelieved = asked && e.malformed;
            if (unbelieved) {
                // The instance's answer to the probe's request cannot be checked (rule 1): as after any other
                // request, it gets no statuses until it restarts, though it may answer well at the next probe.
                distrust();
            }
            why = unbelieved ? "cannot be believed" : refuses(e) ? "refuses " + e.status
                    : e.status == 503 ? "not ready" : "unreachable";
            line = "the sidecar at " + client.url() + (unbelieved ? " cannot be believed: "
                    : refuses(e) ? " refuses the agent: " : " does not take statuses: ") + e.getMessage();
        }
        String cause = "probe " + why;
        if (why.equals(saidWhy)) {
            // Said again only when the reason changes: a repeat is counted in its reason's next line.
            warnings.repeated(cause);
        } else if (warnings.warn(cause, line + "; statuses stay on Connect's own path, checking again every "
                + options.probeIntervalMs + " ms")) {
            // A reason that changes back and forth is still one line a minute per reason.
            saidWhy = why;
        }
    }

    /** An answer that waiting will not change: bad token (401, 403), no agent route (404), a request it rejects. */
    static boolean refuses(SidecarException e) {
        return e.status == 400 || e.status == 401 || e.status == 403 || e.status == 404;
    }

    /** Whether the sidecar refused a whole request, taking nothing of it (PROTOCOL.md: 400, 401, 409, 503). */
    static boolean tookNothing(SidecarException e) {
        return !e.reached || refuses(e) || e.status == 409 || e.status == 503;
    }

    /** A step on QUIESCING; returns true when the agent is on the sidecar from now on. */
    boolean onQuiescing() {
        if (connect.quiet(QUIET_CHECK_MS)) {
            if (router.toSidecar()) {
                arrived();
                return true;
            }
            return false;
        }
        if (now() >= quiesceDeadline) {
            router.toFencing(Leaving.Kind.NOT_QUIET, "Connect's own path is not quiet");
            nextProbeAt = now() + options.probeIntervalMs;
            if (notQuietSaid) {
                // Said once while the agent stays on Connect's path: a repeat is counted in the next such line.
                warnings.repeated("not quiet");
                return false;
            }
            notQuietSaid = warnings.warn("not quiet", "Connect's own status path still has writes in flight or queued to "
                    + "re-send after " + options.quietTimeoutMs + " ms (quiet.timeout.ms): statuses stay on it; trying "
                    + "again in " + options.probeIntervalMs + " ms");
            return false;
        }
        Sender.pause(50);
        return false;
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
        notQuietSaid = false;
        connectSince = -1;
        saidWhy = null;
    }

    /** An answer from the instance the request named, or a failed request: another one must not have taken it. */
    AgentAnswer checked(AgentAnswer answer) throws SidecarException {
        if (!answer.instance.equals(instance)) {
            throw new SidecarException("answered as instance " + answer.instance + " a request to instance " + instance,
                    200, -1, true, true);
        }
        return answer;
    }

    /**
     * Another instance refused the request (409, nothing taken): the sidecar restarted. The old instance may live on
     * (a pod still terminating), writing what it holds of this session until its lease ends, so the keys pending
     * there are sent to the new one only after that. Returns false when the new one is not one to hand writes to: as
     * the probe, only an instance the agent believes (rule 1), whose {@code GET /ready} answers 200.
     */
    boolean restarted(List<StatusUpdate> batch, long lastPostToOld) {
        router.returnBatch(batch);
        try {
            SidecarIdentity identity = client.identify();
            if (identity.mismatch(clusterId, statusTopic) != null || identity.instance.equals(instance)
                    || distrusted.contains(identity.instance)) {
                return false;
            }
            client.ready();
            AgentLog.info("the sidecar at " + client.url() + " restarted (instance " + identity.instance + ", was "
                    + instance + "): what was pending at the old instance goes to the new one once the old one's lease "
                    + "and write bound have passed");
            instance = identity.instance;
            writeBoundMs = Math.max(writeBoundMs, identity.writeBoundMs);
            router.sidecarRestarted(fenceAfter(lastPostToOld));
            return true;
        } catch (SidecarException e) {
            return false;
        }
    }

    /** The sidecar's write bound ({@code write_bound_ms} of its {@code GET /}). */
    long writeBoundMs() {
        return writeBoundMs;
    }

    /** How long a write may be pending at the sidecar without an outcome (rule 5): its write bound, a poll, a margin. */
    long outcomeBoundMs() {
        return writeBoundMs + options.pollIntervalMs + Sender.FENCE_MARGIN_MS;
    }

    /**
     * How long after the sidecar says it wrote a status the worker's own store must have read it back (rule 4): its
     * write bound (a write it reports was acknowledged; the margin covers the worker's reading) and the margin.
     */
    long readBackMs() {
        return writeBoundMs + Sender.FENCE_MARGIN_MS;
    }

    /**
     * When nothing the sidecar took in a request sent at {@code postedAt} can land any more: it starts no write
     * after the session's lease, and one it started lands within its write bound (or never).
     */
    long fenceAfter(long postedAt) {
        return fenceAfterLease(postedAt, options.leaseMs);
    }

    /** As {@link #fenceAfter}, for a request that asked for a lease of {@code leaseMs}. */
    long fenceAfterLease(long postedAt, long leaseMs) {
        return postedAt + leaseMs + writeBoundMs + Sender.FENCE_MARGIN_MS;
    }

    /** How long until {@code until} (ms); Long.MAX_VALUE: no bound. */
    private static long left(long until) {
        return until == Long.MAX_VALUE ? Long.MAX_VALUE : until - now();
    }

    private static long now() {
        return System.nanoTime() / 1_000_000;
    }
}
