package io.statusstore.agent.path;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.statusstore.agent.json.JsonReader;
import io.statusstore.agent.json.JsonWriter;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.Executors;

/**
 * A sidecar for the tests, answering per PROTOCOL.md (its lease too): it takes items as
 * pending and writes them to a shared {@link Topic} at once or when released, never after this agent session's
 * lease has ended (unless the agent sent "final").
 */
public final class FakeSidecar {
    /**
     * How it answers {@code POST /agent/statuses}: as PROTOCOL.md says (OK), 503, late, or as a faulty peer does:
     * 200 with another shape, with JSON nested 100,000 deep, naming a seq never sent, or naming another key for a
     * seq it took. (A {@link TrickleProxy} in front of it hands answers back a byte at a time.)
     */
    enum Answering { OK, UNAVAILABLE, LATE, WRONG_SHAPE, DEEP, UNKNOWN_SEQ, WRONG_KEY }

    final Topic topic;
    public volatile String clusterId = "cluster-1";
    volatile String statusTopic = "connect-status";
    volatile long protocol = 1;
    /** What it says a write it started may take to land (GET /): none here, its writes are instant. */
    volatile long writeBoundMs = 0;
    volatile Answering answering = Answering.OK;
    volatile long lateMs = 400;
    /** Whether {@code GET /ready} answers 200 (else 503). */
    volatile boolean ready = true;
    /** The bearer token requests must carry (401 otherwise), or null for none. */
    volatile String token;
    /** Says "written" of what it takes without writing it (rule 4's liar). */
    volatile boolean lying;
    /** Write each item as soon as it is taken; when false items wait for {@link #release}. */
    public volatile boolean writeAtOnce = true;
    final Set<String> refuse = new HashSet<>();
    final Set<String> drop = new HashSet<>();
    final Map<String, Long> attempts = new LinkedHashMap<>();

    private HttpServer server;
    private int port;
    private String instance;
    private final List<Map<?, ?>> posts = new ArrayList<>();
    private final Map<String, Map<?, ?>> pending = new LinkedHashMap<>();
    private final TreeMap<Long, Map<String, Object>> outcomes = new TreeMap<>();
    private long leaseUntil = Long.MAX_VALUE;
    private final Map<String, Map<?, ?>> oldPending = new LinkedHashMap<>();
    private long oldLeaseUntil = -1;
    /** Each request's arrival and the lease end it granted. */
    private final List<long[]> leases = new ArrayList<>();
    private boolean finalSeen;
    private int gets;

    public FakeSidecar(Topic topic) {
        this.topic = topic;
    }

    /** Starts (again, on the same port, as a new instance with no memory of the old one). */
    public synchronized FakeSidecar start() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        port = server.getAddress().getPort();
        instance = UUID.randomUUID().toString();
        pending.clear();
        outcomes.clear();
        leaseUntil = Long.MAX_VALUE;
        finalSeen = false;
        server.createContext("/", this::handle);
        // A handler that answers late or a byte at a time holds no other request.
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
        oldPending.putAll(pending);
        oldLeaseUntil = leaseUntil;
        pending.clear();
        outcomes.clear();
        leaseUntil = Long.MAX_VALUE;
        instance = UUID.randomUUID().toString();
    }

    /** The old instance writes what it held, if its lease still runs; returns how many. */
    synchronized int releaseOld() {
        if (now() > oldLeaseUntil) {
            return 0;
        }
        for (Map<?, ?> item : oldPending.values()) {
            topic.append(key(item), (String) item.get("trace"), "old sidecar", value(item));
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

    synchronized int pendingCount() {
        return pending.size();
    }

    synchronized int gets() {
        return gets;
    }

    /** When the agent's lease ends (System.nanoTime() ms), as of the latest request. */
    synchronized long leaseEnd() {
        return leaseUntil;
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

    /** Writes what waits, as a sidecar whose brokers came back would: only while the agent's lease runs. */
    synchronized int release() {
        int written = 0;
        boolean leaseValid = finalSeen || now() <= leaseUntil;
        for (Map<?, ?> item : pending.values()) {
            if (leaseValid) {
                write(item);
                written++;
            } else {
                outcome(item, "expired", "the agent's lease ended");
            }
        }
        pending.clear();
        return written;
    }

    /**
     * Settles what waits as a sidecar that was stopped past the agent's lease does when it runs again, its probes
     * before the agent's next request: "expired", never written. Returns how many.
     */
    synchronized int expire() {
        int expired = pending.size();
        for (Map<?, ?> item : pending.values()) {
            outcome(item, "expired", "the agent's lease ended");
        }
        pending.clear();
        return expired;
    }

    /** Gives up on what waits (its retries ran out): each becomes a "failed" outcome. */
    synchronized int fail() {
        int failed = pending.size();
        for (Map<?, ?> item : pending.values()) {
            outcome(item, "failed", "retries exhausted");
        }
        pending.clear();
        return failed;
    }

    private void handle(HttpExchange exchange) throws IOException {
        try {
            if (exchange.getRequestMethod().equals("GET") && exchange.getRequestURI().getPath().equals("/")) {
                synchronized (this) {
                    gets++;
                }
                answer(exchange, 200, new JsonWriter().beginObject()
                        .name("version").value("test").name("kafka_cluster_id").value(clusterId)
                        .name("status_topic").value(statusTopic).name("instance").value(instance())
                        .name("agent_protocol").value(protocol).name("write_bound_ms").value(writeBoundMs)
                        .endObject().toString());
                return;
            }
            if (exchange.getRequestMethod().equals("GET") && exchange.getRequestURI().getPath().equals("/ready")) {
                if (ready) {
                    answer(exchange, 200, "{\"status\":\"ready\",\"message\":\"The brokers answer.\"}");
                } else {
                    answer(exchange, 503, "{\"error_code\":503,\"message\":\"Not ready: the brokers\"}");
                }
                return;
            }
            if (!exchange.getRequestMethod().equals("POST") || !exchange.getRequestURI().getPath().equals("/agent/statuses")) {
                answer(exchange, 404, "{}");
                return;
            }
            String expected = token;
            if (expected != null && !("Bearer " + expected).equals(exchange.getRequestHeaders().getFirst("Authorization"))) {
                answer(exchange, 401, "{\"detail\":\"bad token\"}");
                return;
            }
            Map<?, ?> body = (Map<?, ?>) JsonReader.parse(read(exchange.getRequestBody()));
            Object to = body.get("instance");
            if (to != null && !to.equals(instance())) {
                answer(exchange, 409, "{\"error_code\":409,\"message\":\"This is sidecar instance " + instance()
                        + ", not " + to + ": nothing of the request was taken\"}");
                return;
            }
            Answering how = answering;
            if (how == Answering.UNAVAILABLE) {
                exchange.getResponseHeaders().add("Retry-After", "0.05");
                answer(exchange, 503, "{\"detail\":\"not ready\"}");
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
            String taken = take(body);
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
            answer(exchange, 400, "{\"detail\":\"" + e + "\"}");
        }
    }

    private synchronized String take(Map<?, ?> body) {
        posts.add(body);
        // PROTOCOL.md: the lease ends lease_ms after the request was sent (the agent's wall clock, the same
        // machine's here) or after it arrived, whichever is earlier.
        long lease = (Long) body.get("lease_ms");
        long sentAgo = System.currentTimeMillis() - (Long) body.get("sent_at_ms");
        leaseUntil = now() + lease - Math.max(0, sentAgo);
        leases.add(new long[] {now(), leaseUntil});
        if (Boolean.TRUE.equals(body.get("final"))) {
            finalSeen = true;
        }
        JsonWriter w = new JsonWriter().beginObject().name("instance").value(instance).name("accepted").beginArray();
        for (Object o : (List<?>) body.get("updates")) {
            Map<?, ?> item = (Map<?, ?>) o;
            String key = key(item);
            long seq = (Long) item.get("seq");
            w.beginObject().name("seq").value(seq);
            if (refuse.contains(key)) {
                w.name("result").value("refused").name("error_code").value(413).name("reason").value("too large");
            } else if (drop.contains(key) && Boolean.TRUE.equals(item.get("safe"))) {
                w.name("result").value("dropped").name("reason").value("another worker's newer status");
            } else {
                w.name("result").value("pending");
                pending.put(key, item);
                if (writeAtOnce) {
                    pending.remove(key);
                    write(item);
                }
            }
            w.endObject();
        }
        w.endArray().name("outcomes").beginArray();
        long ack = (Long) body.get("ack");
        outcomes.headMap(ack, true).clear();
        for (Map<String, Object> outcome : outcomes.values()) {
            w.beginObject().name("seq").value((Long) outcome.get("seq")).name("key").value((String) outcome.get("key"))
                    .name("result").value((String) outcome.get("result"))
                    .name("attempts").value((Long) outcome.get("attempts")).endObject();
        }
        return w.endArray().endObject().toString();
    }

    private void write(Map<?, ?> item) {
        if (!lying) {
            topic.append(key(item), (String) item.get("trace"), "sidecar", value(item));
        }
        outcome(item, "written", null);
    }

    private void outcome(Map<?, ?> item, String result, String reason) {
        String key = key(item);
        outcomes.values().removeIf(o -> o.get("key").equals(key));
        Map<String, Object> outcome = new LinkedHashMap<>();
        outcome.put("seq", item.get("seq"));
        outcome.put("key", key);
        outcome.put("result", result);
        outcome.put("attempts", attempts.getOrDefault(key, 1L));
        outcome.put("reason", reason);
        outcomes.put((Long) item.get("seq"), outcome);
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
        if (kind.equals("task")) {
            return "status-task-" + item.get("connector") + "-" + item.get("task");
        }
        if (kind.equals("connector")) {
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
