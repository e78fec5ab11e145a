package io.statusstore.agent.path;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.statusstore.agent.json.JsonOut;
import io.statusstore.agent.json.JsonTree;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.Executors;
import java.util.function.Predicate;

/**
 * A sidecar for the tests that answers {@code POST /agent/statuses} as the real one does (status_store/agents.py and
 * api/routes/agent.py; protocol-transcript.json holds the two together, TranscriptTest checks this one against it):
 * sessions by agent, each write judged alone (a task STOPPED refused, a putSafe Connect's rules drop dropped), an
 * update sent again taken once, the lease, "final", acknowledgements, 400, 401, 409 and 503 as the sidecar words them.
 * Writes land on a shared {@link Topic} at once, or — while {@link #writeAtOnce} is false, Kafka away from it — wait
 * for {@link #release}, a newer write of a key superseding the one waiting. The outcome of a write comes on a later
 * answer than the one that took it, as the real sidecar's (Kafka acknowledges it after that answer went), unless the
 * request asked to wait ({@code wait_ms}): then its answer waits, that long at most, until every write of the session
 * has its outcome, and carries them. A write not started before its session's
 * lease ended, or one given up without Kafka refusing it ({@link #giveUp}), is "expired". Knobs make it a faulty
 * peer too ({@link Answering}, {@link #lying}).
 */
public final class FakeSidecar {
    /**
     * How it answers {@code POST /agent/statuses}: as PROTOCOL.md says (OK), 503, late, or as a faulty peer does:
     * 200 with another shape, with JSON nested 100,000 deep, naming a seq never sent, or naming another key for a
     * seq it took. (A {@link TrickleProxy} in front of it hands answers back a byte at a time.)
     */
    enum Answering { OK, UNAVAILABLE, LATE, WRONG_SHAPE, DEEP, UNKNOWN_SEQ, WRONG_KEY }

    // The sidecar's own words (agents.py, the route, the store), where the agent or a test reads them.
    static final String EXPIRED = "not written by this sidecar instance and never will be (the agent's lease ended "
            + "before it was sent): the write is the agent's again";
    /** Its words for a write given up without Kafka refusing it (agents.GIVEN_UP_REASON). */
    static final String GIVEN_UP = "given up by this sidecar instance, never refused by Kafka (%s): the write is the "
            + "agent's again, as a stock worker's store sends a write that failed retriably again until it lands";
    static final String FORGOTTEN = "its outcome is no longer kept (a session keeps a bounded number): the write is "
            + "the agent's again";
    static final String DROPPED = "another worker's newer status is in the topic (put_safe, as Connect's store drops it)";
    static final String NEWER = "a newer write for the key was submitted";
    private static final Set<String> STATES = new HashSet<>(Arrays.asList(
            "UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "DESTROYED", "RESTARTING", "STOPPED"));
    private static final int MAX_OUTCOMES_SENT = 1_000;
    /** The lease of a request that ends the session's lease (agents.LEASE_ENDING_MS). */
    private static final long LEASE_ENDING_MS = 1;

    final Topic topic;
    public volatile String clusterId = "cluster-1";
    volatile String statusTopic = "connect-status";
    volatile long protocol = 1;
    /** What it says a write it started may take to land (GET /): none here, its writes are instant. */
    public volatile long writeBoundMs = 0;
    volatile Answering answering = Answering.OK;
    volatile long lateMs = 400;
    /** How late it answers {@code GET /} and {@code GET /ready} (a sidecar under load, or reading its topics slowly). */
    volatile long getLateMs;
    /** Whether {@code GET /ready} answers 200 (else 503). */
    volatile boolean ready = true;
    /** The bearer token requests must carry (401 otherwise), or null for none. */
    volatile String token;
    /** status.storage.retry.max.pending: keys with writes pending past which a request is refused (503). */
    volatile int maxPending = Integer.MAX_VALUE;
    /**
     * status.storage.retry.max.retries, where the transcript sets it to 0: while Kafka is away, what waits is given up
     * after its one attempt ({@link #giveUp}) at the next request.
     */
    volatile int maxRetries = Integer.MAX_VALUE;
    /** Says "written" of what it takes without writing it (rule 4's liar). */
    volatile boolean lying;
    /** Write each item as soon as it is taken; when false items wait for {@link #release}. */
    public volatile boolean writeAtOnce = true;
    /**
     * While items wait for {@link #release}: they are in flight (Kafka slow, not away), so a newer write of a key waits
     * behind its older one instead of superseding it, and both are written in order, as the engine writes a key's
     * write in flight before the one behind it.
     */
    volatile boolean inFlight;
    /**
     * While items wait for {@link #release}: their attempt waited out the write bound without Kafka's answer (the broker
     * down, or the sidecar cut off from it), and the answers list them in {@code timed_out}.
     */
    volatile boolean timedOut;
    /**
     * While items are in flight: their attempt fails this long after the first request that ends the lease arrives
     * (-1: never), so that they are expired on the answer of a request that ends the lease then or later (waiting,
     * wait_ms, for it to fail).
     */
    volatile long attemptFailsAfterMs = -1;
    /** When the attempts in flight fail (ms), set by the first request that ends the lease; -1 before. */
    private long attemptFailsAt = -1;
    /** When the first request that ended the lease arrived (ms), or -1. */
    private long firstLeaseEndAt = -1;
    /** While {@link #timedOut}: a write is said timed out only once it has waited this long since it was taken. */
    volatile long timedOutAfterMs;
    /** When each pending write was taken (ms), by seq. */
    private final Map<Long, Long> takenAt = new HashMap<>();
    /** Keys whose writes it refuses (413: too large even with the trace cut). */
    final Set<String> refuse = new HashSet<>();
    /** Keys whose putSafe it drops, as over another worker's newer status it has read. */
    final Set<String> drop = new HashSet<>();
    /** The attempts a key's writes take (KIP-1278's counters), 1 when not given. */
    final Map<String, Long> attempts = new LinkedHashMap<>();

    private HttpServer server;
    private int port;
    private String instance;
    private final List<Map<?, ?>> posts = new ArrayList<>();
    private final Map<String, Session> sessions = new HashMap<>();
    /** What it has read of the topic per key, for putSafe: the worker and generation of the last status. */
    private final Map<String, Object[]> cache = new HashMap<>();
    private final Map<String, Map<?, ?>> oldPending = new LinkedHashMap<>();
    private long oldLeaseUntil = -1;
    /** Each request's arrival and the lease end it granted. */
    private final List<long[]> leases = new ArrayList<>();
    private long leaseUntil = Long.MAX_VALUE;
    private boolean finalSeen;
    private int gets;
    /** Every POST /agent/statuses that reached it, answered in whatever way. */
    private int statusRequests;
    private final List<Map<?, ?>> wakesTaken = new ArrayList<>();
    private int wokenAnswers;
    private int notFound;
    /** Whether it serves {@code POST /agent/wake}; false: a sidecar of a version before it (404). */
    public volatile boolean wakes = true;

    /** One agent's session: its writes by seq, pending and settled, its lease (agents.AgentSession). */
    private static final class Session {
        final TreeMap<Long, Map<?, ?>> pending = new TreeMap<>();
        final TreeMap<Long, Map<String, Object>> settled = new TreeMap<>();
        long lastSeq;
        /** The highest seq a wake named. */
        long wokenBy;
        long leaseUntil = Long.MIN_VALUE;
        boolean isFinal;

        boolean leaseEnded() {
            return !isFinal && now() > leaseUntil;
        }
    }

    public FakeSidecar(Topic topic) {
        this.topic = topic;
    }

    /** Starts (again, on the same port, as a new instance with no memory of the old one). */
    public synchronized FakeSidecar start() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        port = server.getAddress().getPort();
        instance = UUID.randomUUID().toString();
        sessions.clear();
        leaseUntil = Long.MAX_VALUE;
        finalSeen = false;
        server.createContext("/", this::handle);
        // A handler that answers late holds no other request.
        server.setExecutor(Executors.newCachedThreadPool(task -> {
            Thread thread = new Thread(task, "fake-sidecar");
            thread.setDaemon(true);
            return thread;
        }));
        server.start();
        return this;
    }

    /**
     * A new instance takes over while the old one lives on (a pod still terminating): the old one's pending
     * items stay with it, to be written by {@link #releaseOld} while its lease runs.
     */
    synchronized void replaceKeepingOld() {
        oldPending.clear();
        for (Session session : sessions.values()) {
            for (Map<?, ?> item : session.pending.values()) {
                oldPending.put(key(item), item);
            }
        }
        oldLeaseUntil = leaseUntil;
        sessions.clear();
        leaseUntil = Long.MAX_VALUE;
        instance = UUID.randomUUID().toString();
    }

    /** The old instance writes what it held, if its lease still runs; returns how many. */
    synchronized int releaseOld() {
        if (now() > oldLeaseUntil) {
            return 0;
        }
        for (Map<?, ?> item : oldPending.values()) {
            land(item, "old sidecar");
        }
        return oldPending.size();
    }

    synchronized long oldLeaseEnd() {
        return oldLeaseUntil;
    }

    public void stop() {
        HttpServer s;
        synchronized (this) {
            s = server;
            server = null;
        }
        if (s != null) {
            s.stop(0);
        }
    }

    synchronized boolean started() {
        return server != null;
    }

    public int port() {
        return port;
    }

    public String url() {
        return "http://127.0.0.1:" + port;
    }

    synchronized String instance() {
        return instance;
    }

    public synchronized List<Map<?, ?>> posts() {
        return new ArrayList<>(posts);
    }

    public synchronized int pendingCount() {
        int count = 0;
        for (Session session : sessions.values()) {
            count += session.pending.size();
        }
        return count;
    }

    synchronized int statusRequests() {
        return statusRequests;
    }

    synchronized int gets() {
        return gets;
    }

    /** When the agent's lease ends (System.nanoTime() ms), as of the latest request. */
    synchronized long leaseEnd() {
        return leaseUntil;
    }

    /** When the first request that ended the lease arrived (System.nanoTime() ms), or -1. */
    synchronized long firstLeaseEnd() {
        return firstLeaseEndAt;
    }

    /** The latest lease end granted by the requests that arrived before {@code at}. */
    synchronized long leaseEndBefore(long at) {
        long end = -1;
        for (long[] lease : leases) {
            if (lease[0] < at) {
                end = Math.max(end, lease[1]);
            }
        }
        return end;
    }

    synchronized boolean finalSeen() {
        return finalSeen;
    }

    /** Kafka is back: it writes what waits, or settles "expired" what its session's lease no longer lets it send. */
    synchronized int release() {
        return release(key -> true);
    }

    /** Kafka is back for the partitions of these keys only: {@link #release()} of their writes. */
    synchronized int release(Predicate<String> keys) {
        int written = 0;
        for (Session session : sessions.values()) {
            for (Iterator<Map<?, ?>> waiting = session.pending.values().iterator(); waiting.hasNext();) {
                Map<?, ?> item = waiting.next();
                if (!keys.test(key(item))) {
                    continue;
                }
                waiting.remove();
                if (session.leaseEnded()) {
                    settle(session, item, "expired", EXPIRED);
                } else {
                    write(session, item);
                    written++;
                }
            }
        }
        // A request waiting for outcomes (wait_ms) has them now.
        notifyAll();
        return written;
    }

    /**
     * Settles what waits as a sidecar that was stopped past the agent's lease does when it runs again, its probes
     * before the agent's next request: "expired", never written. Returns how many.
     */
    synchronized int expire() {
        int expired = 0;
        for (Session session : sessions.values()) {
            for (Map<?, ?> item : session.pending.values()) {
                settle(session, item, "expired", EXPIRED);
                expired++;
            }
            session.pending.clear();
        }
        // A request waiting for outcomes (wait_ms) has them now.
        notifyAll();
        return expired;
    }

    /**
     * Gives up on what waits, its retries spent after a retriable error (Kafka away): each is the agent's again, an
     * "expired" outcome. Returns how many.
     */
    synchronized int giveUp() {
        int givenUp = 0;
        for (Session session : sessions.values()) {
            for (Map<?, ?> item : session.pending.values()) {
                settle(session, item, "expired", String.format(GIVEN_UP, "no retries left after "
                        + attemptsOf(key(item)) + " attempt(s); last error: NOT_ENOUGH_REPLICAS"));
                givenUp++;
            }
            session.pending.clear();
        }
        // A request waiting for outcomes (wait_ms) has them now.
        notifyAll();
        return givenUp;
    }

    /** Kafka refuses what waits for good (a fatal error, which Connect's store drops too): each "failed". */
    synchronized int fail() {
        int failed = 0;
        for (Session session : sessions.values()) {
            for (Map<?, ?> item : session.pending.values()) {
                settle(session, item, "failed", "TOPIC_AUTHORIZATION_FAILED is not retriable");
                failed++;
            }
            session.pending.clear();
        }
        // A request waiting for outcomes (wait_ms) has them now.
        notifyAll();
        return failed;
    }

    private void handle(HttpExchange exchange) throws IOException {
        try {
            String path = exchange.getRequestURI().getPath();
            if (exchange.getRequestMethod().equals("GET") && getLateMs > 0) {
                Thread.sleep(getLateMs);
            }
            if (exchange.getRequestMethod().equals("GET") && path.equals("/")) {
                synchronized (this) {
                    gets++;
                }
                answer(exchange, 200, new JsonOut().beginObject()
                        .name("version").value("test").name("kafka_cluster_id").value(clusterId)
                        .name("status_topic").value(statusTopic).name("instance").value(instance())
                        .name("agent_protocol").value(protocol).name("write_bound_ms").value(writeBoundMs)
                        .endObject().toString());
                return;
            }
            if (exchange.getRequestMethod().equals("GET") && path.equals("/ready")) {
                if (ready) {
                    answer(exchange, 200, "{\"status\":\"ready\",\"message\":\"The brokers answer.\"}");
                } else {
                    error(exchange, 503, "Not ready: the brokers");
                }
                return;
            }
            if (!exchange.getRequestMethod().equals("POST")
                    || !(path.equals("/agent/statuses") || path.equals("/agent/wake") && wakes)) {
                synchronized (this) {
                    notFound++;
                }
                error(exchange, 404, "HTTP 404 Not Found");
                return;
            }
            String expected = token;
            if (expected != null && !("Bearer " + expected).equals(exchange.getRequestHeaders().getFirst("Authorization"))) {
                exchange.getResponseHeaders().add("WWW-Authenticate", "Bearer");
                error(exchange, 401, "A valid bearer token is required for writes and configuration reads");
                return;
            }
            Map<?, ?> body = (Map<?, ?>) JsonTree.parse(read(exchange.getRequestBody()));
            if (path.equals("/agent/wake")) {
                try {
                    answer(exchange, 200, "{\"woken\":" + wake(body) + "}");
                } catch (Refusal r) {
                    error(exchange, r.status, r.getMessage());
                }
                return;
            }
            synchronized (this) {
                statusRequests++;
            }
            Answering how = answering;
            if (how == Answering.UNAVAILABLE) {
                exchange.getResponseHeaders().add("Retry-After", "1");
                error(exchange, 503, "Not accepted, try again in 1 s: the test's sidecar is unavailable");
                return;
            }
            if (how == Answering.LATE) {
                Thread.sleep(lateMs);
            }
            if (how == Answering.WRONG_SHAPE || how == Answering.DEEP) {
                // Something else answers in the sidecar's place: nothing is taken.
                answer(exchange, 200, how == Answering.DEEP ? deep() : "{\"instance\":7,\"accepted\":{}}");
                return;
            }
            String taken;
            try {
                taken = take(body);
            } catch (Refusal r) {
                if (r.status == 503) {
                    exchange.getResponseHeaders().add("Retry-After", "1");
                }
                error(exchange, r.status, r.getMessage());
                return;
            }
            switch (how) {
                case UNKNOWN_SEQ:
                    String never = "{\"seq\":999999,\"key\":\"status-task-x-0\",\"result\":\"written\",\"attempts\":1}";
                    answer(exchange, 200, taken.replace("\"outcomes\":[]", "\"outcomes\":[" + never + "]")
                            .replace("\"outcomes\":[{\"seq\"", "\"outcomes\":[" + never + ",{\"seq\""));
                    break;
                case WRONG_KEY:
                    answer(exchange, 200, taken.replaceAll("\"key\":\"status-task-[^\"]*\"",
                            "\"key\":\"status-task-other-9\""));
                    break;
                default:
                    answer(exchange, 200, taken);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            error(exchange, 400, String.valueOf(e));
        }
    }

    /** A whole request refused, nothing of it taken. */
    private static final class Refusal extends Exception {
        private static final long serialVersionUID = 1L;
        final int status;

        Refusal(int status, String message) {
            super(message);
            this.status = status;
        }
    }

    /** The route's agent_statuses, step by step as it takes them. */
    private synchronized String take(Map<?, ?> body) throws Refusal {
        Object to = body.get("instance");
        if (to != null && !to.equals(instance)) {
            throw new Refusal(409, "This is sidecar instance " + instance + ", not " + to + ": nothing of the request "
                    + "was taken");
        }
        posts.add(body);
        String agent = (String) body.get("agent");
        Session session = sessions.computeIfAbsent(agent, a -> new Session());
        expireLapsed();
        if (!writeAtOnce && maxRetries == 0) {
            giveUp();
        }
        // PROTOCOL.md: the lease ends lease_ms after the request was sent (the agent's wall clock, the same
        // machine's here) or after it arrived, whichever is earlier.
        long lease = body.containsKey("lease_ms") ? (Long) body.get("lease_ms") : 10_000;
        Object sentAt = body.get("sent_at_ms");
        long sentAgo = sentAt instanceof Long ? System.currentTimeMillis() - (Long) sentAt : 0;
        session.leaseUntil = now() + lease - Math.max(0, sentAgo);
        leaseUntil = session.leaseUntil;
        leases.add(new long[] {now(), leaseUntil});
        List<?> updates = body.containsKey("updates") ? (List<?>) body.get("updates") : new ArrayList<>();
        Set<String> fresh = new HashSet<>();
        for (Object o : updates) {
            Map<?, ?> item = (Map<?, ?>) o;
            if (!(item.get("seq") instanceof Long)) {
                throw new Refusal(400, "Every update needs its seq (a positive integer)");
            }
            if ((Long) item.get("seq") > session.lastSeq && item.get("kind") != null) {
                fresh.add(key(item));
            }
        }
        checkRoom(fresh);
        JsonOut w = new JsonOut().beginObject().name("instance").value(instance).name("accepted").beginArray();
        Set<Long> settledBefore = new HashSet<>(session.settled.keySet());
        for (Object o : updates) {
            accept(w, session, (Map<?, ?>) o);
        }
        if (Boolean.TRUE.equals(body.get("final"))) {
            session.isFinal = true;
            finalSeen = true;
        }
        long ack = body.containsKey("ack") ? (Long) body.get("ack") : 0;
        session.settled.headMap(ack, true).clear();
        long waitMs = body.get("wait_ms") instanceof Long ? (Long) body.get("wait_ms") : 0;
        // An answer that did not wait (a wake came first) carries no outcome of its own updates, as one without wait_ms.
        boolean waited = waitMs > 0;
        if (lease == LEASE_ENDING_MS && !session.isFinal) {
            endLease(session, waitMs);
        } else if (waitMs > 0) {
            waited = settling(session, waitMs);
        }
        w.endArray().name("outcomes").beginArray();
        int sent = 0;
        for (Map<String, Object> outcome : session.settled.values()) {
            Long seq = (Long) outcome.get("seq");
            if (!waited && seq > ack && !settledBefore.contains(seq) && fresh(updates, seq)) {
                // Written as it was taken here, but Kafka's acknowledgement comes after this answer went.
                continue;
            }
            if (sent++ == MAX_OUTCOMES_SENT) {
                break;
            }
            outcomeBody(w, outcome);
        }
        w.endArray();
        List<Long> timedOutSeqs = new ArrayList<>();
        for (Long seq : session.pending.keySet()) {
            // An attempt of a write this request carried has not had time to wait out its bound.
            Long taken = takenAt.get(seq);
            if (timedOut && !fresh(updates, seq) && timedOutSeqs.size() < MAX_OUTCOMES_SENT
                    && (taken == null || now() - taken >= timedOutAfterMs)) {
                timedOutSeqs.add(seq);
            }
        }
        if (!timedOutSeqs.isEmpty()) {
            w.name("timed_out").beginArray();
            for (Long seq : timedOutSeqs) {
                w.value(seq);
            }
            w.endArray();
        }
        return w.endObject().toString();
    }

    /** Whether {@code seq} is one of the request's own updates. */
    private static boolean fresh(List<?> updates, long seq) {
        for (Object o : updates) {
            if (Long.valueOf(seq).equals(((Map<?, ?>) o).get("seq"))) {
                return true;
            }
        }
        return false;
    }

    /**
     * agents.AgentSession.end_lease: nothing of the session is sent again; writes in flight get {@code waitMs} to settle
     * (an attempt that fails then is expired, the lease having ended), and what then waits for its next attempt is
     * expired at once, the agent's now.
     */
    private void endLease(Session session, long waitMs) {
        if (firstLeaseEndAt < 0) {
            firstLeaseEndAt = now();
        }
        if (inFlight) {
            if (attemptFailsAfterMs < 0) {
                settling(session, waitMs);
                return;
            }
            if (attemptFailsAt < 0) {
                attemptFailsAt = now() + attemptFailsAfterMs;
            }
            if (attemptFailsAt > now() + waitMs) {
                settling(session, waitMs);
                return;
            }
            long until = attemptFailsAt;
            while (now() < until) {
                try {
                    wait(Math.max(1, until - now()));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
        for (Map<?, ?> item : session.pending.values()) {
            settle(session, item, "expired", EXPIRED);
        }
        session.pending.clear();
    }

    /**
     * {@code POST /agent/wake} (agents.AgentSession.wake): the agent holds a write of this seq; an answer of the session
     * waiting for outcomes comes now, and none waits until the session takes that seq.
     */
    private synchronized boolean wake(Map<?, ?> body) throws Refusal {
        Object to = body.get("instance");
        if (to != null && !to.equals(instance)) {
            throw new Refusal(409, "This is sidecar instance " + instance + ", not " + to);
        }
        wakesTaken.add(body);
        Session session = sessions.get((String) body.get("agent"));
        long seq = (Long) body.get("seq");
        if (session == null || seq <= session.lastSeq) {
            return false;
        }
        session.wokenBy = Math.max(session.wokenBy, seq);
        notifyAll();
        return true;
    }

    /** The wakes this sidecar was sent, in order. */
    public synchronized List<Map<?, ?>> wakes() {
        return new ArrayList<>(wakesTaken);
    }

    /** How many requests were answered 404. */
    public synchronized int notFound() {
        return notFound;
    }

    /** How many answers stopped waiting for outcomes because of a wake. */
    public synchronized int wokenAnswers() {
        return wokenAnswers;
    }

    /**
     * The route's wait_ms: until every pending write of the session has its outcome, {@code ms} at most, or until the
     * agent says it holds a write the session has not taken ({@link #wake}). False when it did not wait at all (a
     * wake came before it).
     */
    private boolean settling(Session session, long ms) {
        if (session.wokenBy > session.lastSeq) {
            wokenAnswers++;
            return false;
        }
        long deadline = now() + ms;
        while (!session.pending.isEmpty() && now() < deadline) {
            if (session.wokenBy > session.lastSeq) {
                wokenAnswers++;
                return true;
            }
            try {
                wait(Math.max(1, deadline - now()));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return true;
            }
        }
        return true;
    }

    /** The store's check_room: 503 when the request's new keys would pass max.pending keys with writes pending. */
    private void checkRoom(Set<String> fresh) throws Refusal {
        Set<String> pendingKeys = new HashSet<>();
        for (Session session : sessions.values()) {
            for (Map<?, ?> item : session.pending.values()) {
                pendingKeys.add(key(item));
            }
        }
        Set<String> growth = new HashSet<>(fresh);
        growth.removeAll(pendingKeys);
        if (pendingKeys.size() + growth.size() > maxPending) {
            throw new Refusal(503, "Not accepted, try again in 1 s: status updates of " + maxPending + " keys are "
                    + "pending (status.storage.retry.max.pending): Kafka is not taking writes as fast as they come; "
                    + "try again later");
        }
    }

    /** One update: taken once, judged alone (the route's _accept). */
    private void accept(JsonOut w, Session session, Map<?, ?> item) {
        long seq = (Long) item.get("seq");
        w.beginObject().name("seq").value(seq);
        if (seq <= session.lastSeq) {
            Map<String, Object> settled = session.settled.get(seq);
            if (session.pending.containsKey(seq)) {
                w.name("result").value("pending");
            } else if (settled != null) {
                outcomeFields(w, settled);
            } else {
                w.name("result").value("expired").name("reason").value(FORGOTTEN);
            }
            w.endObject();
            return;
        }
        session.lastSeq = seq;
        String kind = (String) item.get("kind");
        String key = key(item);
        String state = (String) item.get("state");
        boolean status = "task".equals(kind) || "connector".equals(kind);
        if (status && !STATES.contains(state)) {
            w.name("result").value("refused").name("error_code").value(422)
                    .name("reason").value("state: not a status state: " + state);
        } else if ("task".equals(kind) && "STOPPED".equals(state)) {
            w.name("result").value("refused").name("error_code").value(422)
                    .name("reason").value("task " + key + ": a task cannot be STOPPED");
        } else if (refuse.contains(key)) {
            w.name("result").value("refused").name("error_code").value(413).name("reason").value("too large");
        } else if (status && Boolean.TRUE.equals(item.get("safe")) && (drop.contains(key) || unsafe(key, item))) {
            w.name("result").value("dropped").name("reason").value(DROPPED);
        } else {
            w.name("result").value("pending");
            Map<?, ?> older = null;
            int ofKey = 0;
            for (Map<?, ?> p : session.pending.values()) {
                if (key(p).equals(key)) {
                    older = p;
                    ofKey++;
                }
            }
            // In flight, the key's first write is not superseded: only the one waiting behind it.
            if (older != null && !(inFlight && ofKey == 1)) {
                session.pending.remove((Long) older.get("seq"));
                settle(session, older, "superseded", NEWER);
            }
            session.pending.put(seq, item);
            takenAt.put(seq, now());
            if (writeAtOnce) {
                session.pending.remove(seq);
                write(session, item);
            }
        }
        w.endObject();
    }

    /** Connect's safe-write rule against what it has read: another worker's status of a newer generation. */
    private boolean unsafe(String key, Map<?, ?> item) {
        Object[] cached = cache.get(key);
        return cached != null && !cached[0].equals(item.get("worker_id")) && (Long) cached[1] > (Long) item.get("generation");
    }

    /**
     * A session's pending write whose lease ended is not sent any more: at its next probe it expires. Not one in flight:
     * its attempt ends only when it fails ({@link #attemptFailsAfterMs}), or on {@link #release}.
     */
    private void expireLapsed() {
        if (writeAtOnce || inFlight) {
            return;
        }
        for (Session session : sessions.values()) {
            if (session.leaseEnded()) {
                for (Map<?, ?> item : session.pending.values()) {
                    settle(session, item, "expired", EXPIRED);
                }
                session.pending.clear();
            }
        }
    }

    private void write(Session session, Map<?, ?> item) {
        if (!lying) {
            land(item, "sidecar");
        }
        settle(session, item, "written", null);
    }

    private void land(Map<?, ?> item, String via) {
        String key = key(item);
        byte[] value = value(item);
        if (value != null && item.get("generation") instanceof Long) {
            cache.put(key, new Object[] {item.get("worker_id"), item.get("generation")});
        } else {
            cache.remove(key);
        }
        topic.append(key, (String) item.get("trace"), via, value);
    }

    private void settle(Session session, Map<?, ?> item, String result, String reason) {
        Map<String, Object> outcome = new LinkedHashMap<>();
        outcome.put("seq", item.get("seq"));
        outcome.put("key", key(item));
        outcome.put("result", result);
        outcome.put("attempts", attemptsOf(key(item)));
        outcome.put("reason", reason);
        session.settled.put((Long) item.get("seq"), outcome);
    }

    private long attemptsOf(String key) {
        return attempts.getOrDefault(key, 1L);
    }

    private static void outcomeBody(JsonOut w, Map<String, Object> outcome) {
        w.beginObject();
        outcomeFields(w, outcome);
        w.endObject();
    }

    /** As agents.outcome_body: a written write's outcome carries no reason. */
    private static void outcomeFields(JsonOut w, Map<String, Object> outcome) {
        w.name("seq").value((Long) outcome.get("seq")).name("key").value((String) outcome.get("key"))
                .name("result").value((String) outcome.get("result"))
                .name("attempts").value((Long) outcome.get("attempts"));
        if (outcome.get("reason") != null) {
            w.name("reason").value((String) outcome.get("reason"));
        }
    }

    private static byte[] value(Map<?, ?> item) {
        return Topic.value((String) item.get("kind"), (String) item.get("state"), (String) item.get("trace"),
                (String) item.get("worker_id"), number(item.get("generation")), (String) item.get("topic"),
                (String) item.get("connector"), number(item.get("task")), number(item.get("discoverTimestamp")));
    }

    private static long number(Object value) {
        return value instanceof Long ? (Long) value : 0;
    }

    private static String key(Map<?, ?> item) {
        String kind = (String) item.get("kind");
        if ("task".equals(kind)) {
            return "status-task-" + item.get("connector") + "-" + item.get("task");
        }
        if ("connector".equals(kind)) {
            return "status-connector-" + item.get("connector");
        }
        return "status-topic-" + item.get("topic") + ":connector-" + item.get("connector");
    }

    private static String deep() {
        StringBuilder deep = new StringBuilder("{\"instance\":\"i\",\"accepted\":");
        for (int i = 0; i < 100_000; i++) {
            deep.append('[');
        }
        return deep.toString();
    }

    private static void error(HttpExchange exchange, int status, String message) throws IOException {
        answer(exchange, status, new JsonOut().beginObject().name("error_code").value(status)
                .name("message").value(message).endObject().toString());
    }

    private static void answer(HttpExchange exchange, int status, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().add("Content-Type", "application/json");
        try {
            exchange.sendResponseHeaders(status, bytes.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        } catch (IOException e) {
            // The agent gave up waiting (a late answer): nothing to do.
        }
    }

    private static String read(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buffer = new byte[4096];
        int n;
        while ((n = in.read(buffer)) > 0) {
            out.write(buffer, 0, n);
        }
        return new String(out.toByteArray(), StandardCharsets.UTF_8);
    }

    static long now() {
        return System.nanoTime() / 1_000_000;
    }
}
