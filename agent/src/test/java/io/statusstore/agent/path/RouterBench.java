package io.statusstore.agent.path;

import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.sidecar.AgentAnswer;
import io.statusstore.agent.status.StatusUpdate;

import java.io.PrintStream;
import java.lang.reflect.Constructor;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * The work the agent does under the lock worker threads take in {@code Router.offer}, measured
 * without I/O: the sender's steps are made as {@link Sender} makes them, the sidecar's answers built in memory, the
 * worker's store reading back through {@link ReadBack} as Connect's reader does.
 *
 * <ul>
 *   <li>{@code offer}: a worker thread's {@code offer()} latency (p50, p99, max) while {@code keys} keys are pending at
 *   the sidecar and the sender steps as each write wakes it (it sends the write, the sidecar takes it pending);</li>
 *   <li>{@code drain-sidecar}: the sidecar settles those keys, {@code OUTCOMES_PER_ANSWER} outcomes an answer (a
 *   sidecar writing as Kafka acknowledges), each read back by the worker's store: until the table is empty;</li>
 *   <li>{@code drain-connect}: the agent leaves the sidecar with those keys unsent (nothing there: no fence) and
 *   hands each to Connect's path: until the table is empty.</li>
 * </ul>
 *
 * One JSON line per measure and round on stdout. Run by {@code agent/bench.sh} (docs/BENCHMARKS.md); RouterBenchTest
 * runs it small, so that it keeps running as the classes it builds change.
 */
public final class RouterBench {
    private static final int OUTCOMES_PER_ANSWER = 10;
    private static final int BATCH = 500;
    private static final long WARM_UP_OFFERS = 20_000;
    private static final long MEASURED_OFFERS = 20_000;
    /** The worker's pace: one write every this many microseconds (a rebalance of many tasks writes this fast). */
    private static final long OFFER_EVERY_US = 50;

    private final int keys;
    private final PrintStream out;
    private final Constructor<AgentAnswer> answers;

    RouterBench(int keys, PrintStream out) throws ReflectiveOperationException {
        this.keys = keys;
        this.out = out;
        // The answer as AgentAnswer.parse makes it (instance, accepted, outcomes, timed out), without the JSON.
        this.answers = AgentAnswer.class.getDeclaredConstructor(String.class, List.class, List.class, List.class);
        answers.setAccessible(true);
    }

    public static void main(String[] args) throws Exception {
        int keys = args.length > 0 ? Integer.parseInt(args[0]) : 10_000;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        new RouterBench(keys, System.out).run(rounds);
    }

    /** Every measure, {@code rounds} times. */
    void run(int rounds) throws Exception {
        for (int round = 1; round <= rounds; round++) {
            offers(round);
            drainThroughSidecar(round);
            drainThroughConnect(round);
        }
    }

    /** offer() latency with {@link #keys} keys pending at the sidecar, the sender stepping as writes wake it. */
    private void offers(int round) throws Exception {
        ReadBack readBack = new ReadBack(4 * keys, 600_000);
        Router router = onSidecar(readBack);
        pending(router, 0, keys);
        AtomicBoolean running = new AtomicBoolean(true);
        Thread sender = new Thread(() -> {
            try {
                while (running.get()) {
                    if (!step(router) && running.get()) {
                        router.await(1_000);
                    }
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, "bench-sender");
        sender.start();
        long[] latencies = new long[(int) MEASURED_OFFERS];
        for (long i = 0; i < WARM_UP_OFFERS + MEASURED_OFFERS; i++) {
            StatusUpdate write = task((int) (i % keys), i % 2 == 0 ? "PAUSED" : "RUNNING");
            long began = System.nanoTime();
            if (!router.offer(write)) {
                throw new IllegalStateException("the router did not take " + write + " (path " + router.path() + ")");
            }
            long took = System.nanoTime() - began;
            if (i >= WARM_UP_OFFERS) {
                latencies[(int) (i - WARM_UP_OFFERS)] = took;
            }
            pace(began + TimeUnit.MICROSECONDS.toNanos(OFFER_EVERY_US));
        }
        running.set(false);
        synchronized (router) {
            router.notifyAll();
        }
        sender.join(10_000);
        Arrays.sort(latencies);
        print(round, "offer", String.format(Locale.ROOT, "\"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f",
                latencies[latencies.length / 2] / 1e3, latencies[latencies.length * 99 / 100] / 1e3,
                latencies[latencies.length - 1] / 1e3));
    }

    /** The sidecar settles {@link #keys} pending keys, a few outcomes an answer, each read back by the worker. */
    private void drainThroughSidecar(int round) throws Exception {
        ReadBack readBack = new ReadBack(4 * keys, 600_000);
        Router router = onSidecar(readBack);
        List<StatusUpdate> sent = pending(router, 0, keys);
        long began = System.nanoTime();
        for (int from = 0; from < sent.size(); from += OUTCOMES_PER_ANSWER) {
            List<AgentAnswer.Item> outcomes = new ArrayList<>();
            for (StatusUpdate u : sent.subList(from, Math.min(sent.size(), from + OUTCOMES_PER_ANSWER))) {
                outcomes.add(new AgentAnswer.Item(u.seq, u.key, "written", 1, null));
            }
            long now = now();
            router.ack();
            router.apply(Collections.<StatusUpdate>emptyList(), answer(Collections.<AgentAnswer.Item>emptyList(),
                    outcomes), now, now + 60_000);
            for (AgentAnswer.Item outcome : outcomes) {
                readBack.read(outcome.key, value(sent.get((int) (outcome.seq - sent.get(0).seq))));
            }
            step(router);
        }
        if (router.size() != 0) {
            throw new IllegalStateException(router.size() + " keys left after every outcome was read back");
        }
        print(round, "drain-sidecar", String.format(Locale.ROOT, "\"ms\": %.1f", (System.nanoTime() - began) / 1e6));
    }

    /** The agent leaves the sidecar with {@link #keys} keys unsent: each goes through Connect's path. */
    private void drainThroughConnect(int round) {
        Router router = onSidecar(new ReadBack(4 * keys, 600_000));
        for (int i = 0; i < keys; i++) {
            router.offer(task(i, "RUNNING"));
        }
        long began = System.nanoTime();
        router.toFencing(Leaving.Kind.STOPS, "the benchmark leaves");
        int drained = 0;
        StatusUpdate next;
        while ((next = router.takeReady(now())) != null) {
            router.drained(next);
            drained++;
        }
        if (drained != keys || router.path() != Router.Path.CONNECT) {
            throw new IllegalStateException(drained + " of " + keys + " drained, path " + router.path());
        }
        print(round, "drain-connect", String.format(Locale.ROOT, "\"ms\": %.1f", (System.nanoTime() - began) / 1e6));
    }

    private Router onSidecar(ReadBack readBack) {
        Router router = new Router(10 * keys, new AgentMetrics(), readBack);
        router.toQuiescing();
        router.toSidecar();
        return router;
    }

    /** Offers keys [from, to) and has the sidecar take each pending; returns them as sent. */
    private List<StatusUpdate> pending(Router router, int from, int to) throws Exception {
        for (int i = from; i < to; i++) {
            router.offer(task(i, "RUNNING"));
        }
        List<StatusUpdate> sent = new ArrayList<>();
        List<StatusUpdate> batch;
        while (!(batch = router.takeBatch(BATCH, now())).isEmpty()) {
            accept(router, batch);
            sent.addAll(batch);
        }
        return sent;
    }

    /** One step of the sender on the sidecar path, without its I/O; returns whether it sent anything. */
    private boolean step(Router router) throws Exception {
        long now = now();
        router.verify(now);
        router.pendingSince(now - 60_000);
        router.nextVerifyDeadline();
        router.nextRelease(now);
        router.ack();
        List<StatusUpdate> batch = router.takeBatch(BATCH, now);
        if (!batch.isEmpty()) {
            accept(router, batch);
        }
        router.hasPending();
        router.hasUnsent();
        return !batch.isEmpty();
    }

    /** The sidecar's answer to a request carrying {@code batch}: every write taken, pending. */
    private void accept(Router router, List<StatusUpdate> batch) throws Exception {
        List<AgentAnswer.Item> accepted = new ArrayList<>();
        for (StatusUpdate u : batch) {
            accepted.add(new AgentAnswer.Item(u.seq, null, "pending", 0, null));
        }
        long now = now();
        router.apply(batch, answer(accepted, Collections.<AgentAnswer.Item>emptyList()), now, now + 60_000);
    }

    private AgentAnswer answer(List<AgentAnswer.Item> accepted, List<AgentAnswer.Item> outcomes) throws Exception {
        return answers.newInstance("bench", accepted, outcomes, Collections.<Long>emptyList());
    }

    private static StatusUpdate task(int i, String state) {
        return StatusUpdate.task("connector-" + i / 10, i % 10, state, null, "127.0.0.1:8083", 1, true, null, false,
                null);
    }

    /** The record Connect's store reads back for {@code u}. */
    private static byte[] value(StatusUpdate u) {
        return ("{\"state\":\"" + u.state + "\",\"trace\":null,\"worker_id\":\"" + u.workerId + "\",\"generation\":"
                + u.generation + ",\"version\":null}").getBytes(StandardCharsets.UTF_8);
    }

    private static void pace(long untilNanos) {
        while (System.nanoTime() < untilNanos) {
            LockSupport.parkNanos(10_000);
        }
    }

    private static long now() {
        return System.nanoTime() / 1_000_000;
    }

    private void print(int round, String measure, String figures) {
        out.println("{\"round\": " + round + ", \"measure\": \"" + measure + "\", \"keys\": " + keys + ", "
                + figures + "}");
    }
}
