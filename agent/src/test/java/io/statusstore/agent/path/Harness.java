package io.statusstore.agent.path;

import io.statusstore.agent.AgentOptions;
import io.statusstore.agent.Warnings;
import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.sidecar.SidecarClient;
import io.statusstore.agent.sidecar.Token;
import io.statusstore.agent.status.StatusUpdate;

import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A router and its sender between a {@link FakeSidecar} and a {@link FakeConnect}, with the worker's writes
 * made as the advice makes them (the original runs when the router does not take the write). Every write
 * carries a marker "v<n>", n growing, so the tests can tell older from newer on the shared {@link Topic}.
 */
final class Harness implements AutoCloseable {
    static final String TIMINGS = "fallback.after.ms=500,lease.ms=400,read.timeout.ms=150,connect.timeout.ms=150,"
            + "poll.interval.ms=50,probe.interval.ms=50,quiet.timeout.ms=3000,stop.timeout.ms=300";

    final Topic topic = new Topic();
    final FakeSidecar sidecar = new FakeSidecar(topic);
    final FakeConnect connect = new FakeConnect(topic);
    final AgentMetrics metrics = new AgentMetrics();
    /** How far the clock of the agent's warnings runs ahead of the real one ({@link #aMinutePasses}). */
    private final AtomicLong warningsAhead = new AtomicLong();
    final Warnings warnings = new Warnings(() -> System.nanoTime() / 1_000_000 + warningsAhead.get());
    final Map<String, String> newest = new LinkedHashMap<>();
    AgentOptions options;
    Router router;
    /** The token the agent sends (as STATUS_STORE_SIDECAR_REST_TOKEN), or null. */
    String token;
    /** Where the agent reaches the sidecar (a proxy in front of it), or null for the sidecar itself. */
    String url;
    private Thread thread;
    private int version;

    /** Starts the sidecar, then the agent with the test timings and {@code extra} options. */
    Harness start(String extra) throws Exception {
        if (!sidecar.started()) {
            sidecar.start();
        }
        Map<String, String> given = new LinkedHashMap<>();
        for (String option : (TIMINGS + (extra.isEmpty() ? "" : "," + extra)).split(",")) {
            given.put(option.substring(0, option.indexOf('=')), option);
        }
        options = AgentOptions.parse("url=" + (url != null ? url : sidecar.url()) + "," + String.join(",", given.values()),
                token == null ? Collections.<String, String>emptyMap()
                        : Collections.singletonMap(AgentOptions.TOKEN_ENV, token));
        ReadBack readBack = new ReadBack(2 * options.maxKeys, 60_000);
        topic.reader(readBack::read);
        router = new Router(options.maxKeys, metrics, readBack);
        router.undoWith(connect);
        Sender sender = new Sender(options, router, new SidecarClient(options.url, Token.from(options.tokenFile, options.token),
                options.connectTimeoutMs, options.readTimeoutMs, null), connect, metrics, warnings, "cluster-1",
                "connect-status");
        thread = new Thread(sender, "test-sender");
        thread.setDaemon(true);
        thread.start();
        return this;
    }

    /** For the agent's warnings a minute passes: each cause may be said again, with the count of its repeats. */
    void aMinutePasses() {
        warningsAhead.addAndGet(Warnings.INTERVAL_MS);
    }

    /** Interrupts the sender's thread, as nothing in the worker ever should: it ends. */
    void interruptSender() {
        thread.interrupt();
    }

    boolean senderAlive() {
        return thread.isAlive();
    }

    StatusUpdate task(String connector, int task, String state, boolean safe) {
        return StatusUpdate.task(connector, task, state, "v" + (++version), "127.0.0.1:8083", 1, true, null, safe, null);
    }

    /** The worker writes: the agent takes it, or the original runs on the worker's thread. Returns whether taken. */
    boolean write(StatusUpdate update) {
        newest.put(update.key, update.trace);
        if (router.offer(update)) {
            return true;
        }
        connect.original(update);
        return false;
    }

    boolean write(String connector, int task, String state) {
        return write(task(connector, task, state, false));
    }

    /** Starts with the test timings, the sidecar saying its writes take up to {@code ms} to land; returns on it. */
    void onSidecarWithWriteBound(long ms) throws Exception {
        sidecar.writeBoundMs = ms;
        start("");
        awaitPath(Router.Path.SIDECAR, 2_000);
    }

    /**
     * The sidecar holds this write without an outcome and says its attempt timed out, so rule 5 asks the worker's
     * producer whether it can write; returns once asked, with the producer's answer for the test to give.
     */
    java.util.concurrent.CompletableFuture<Boolean> rule5Asks(String connector, int task, String state) {
        sidecar.writeAtOnce = false;
        sidecar.timedOut = true;
        java.util.concurrent.CompletableFuture<Boolean> producerWrote = new java.util.concurrent.CompletableFuture<>();
        connect.answer = producerWrote;
        write(connector, task, state);
        await(() -> !connect.writeChecks().isEmpty(), 5_000, "rule 5's question to the worker's producer");
        return producerWrote;
    }

    void awaitPath(Router.Path path, long ms) {
        await(() -> router.path() == path, ms, "path " + path + " (now " + router.path() + ")");
    }

    static void await(BooleanSupplier condition, long ms, String what) {
        long deadline = System.nanoTime() + ms * 1_000_000;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not within " + ms + " ms: " + what);
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
    }

    /** Waits for every key to end with the worker's newest write. */
    void awaitNewestLanded(long ms) {
        await(() -> topic.latest().equals(newest), ms, "newest writes landed: " + newest + " vs " + topic.latest());
    }

    /**
     * On Connect's own path, the agent asks the sidecar to take nothing for a dozen of its probes (50 ms apart): it does
     * not believe that instance ({@code what}: what that shows).
     */
    void assertAskedNothingAgain(String what) throws InterruptedException {
        await(() -> router.path() == Router.Path.CONNECT, 2_000, "on Connect's own path");
        int requests = sidecar.statusRequests();
        Thread.sleep(600);
        assertEquals(requests, sidecar.statusRequests(), what);
        assertEquals(Router.Path.CONNECT, router.path());
    }

    /** Nothing lost, and no key ever went back to an older write. */
    void assertInvariants() {
        assertEquals(newest, topic.latest(), "every key ends with its newest write");
        Map<String, Integer> seen = new HashMap<>();
        for (Topic.Record r : topic.records()) {
            int v = Integer.parseInt(r.marker.substring(1));
            Integer before = seen.put(r.key, v);
            assertTrue(before == null || before <= v, "older over newer on " + r.key + ": " + topic.records());
        }
    }

    List<Topic.Record> sidecarWrites() {
        return topic.via("sidecar");
    }

    List<Topic.Record> connectWrites() {
        return topic.via("connect");
    }

    /** Stops the agent as the store's stop() does; returns how long it took. */
    long stop(long boundMs) throws InterruptedException {
        long start = System.nanoTime();
        router.requestStop();
        assertEquals(0, router.awaitStopped(boundMs, 0), "keys left unsettled at stop");
        return (System.nanoTime() - start) / 1_000_000;
    }

    @Override
    public void close() {
        if (router != null) {
            router.requestStop();
            router.finish();
        }
        if (thread != null) {
            try {
                thread.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        sidecar.stop();
    }
}
