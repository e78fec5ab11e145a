package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * Connect's own path for the tests: writes land on the shared {@link Topic}, at once, or — while
 * {@link #holding} — only when released, like records Connect's producer keeps re-sending through an outage.
 */
final class FakeConnect implements ConnectPath {
    private final Topic topic;
    private final List<StatusUpdate> inFlight = new ArrayList<>();
    private final List<StatusUpdate> agentWrites = new ArrayList<>();
    volatile boolean holding;
    /** What {@link #quiet} throws instead of answering (a fault in the agent's own step), or null. */
    volatile Error quietFails;
    /** Whether the worker's own producer can write to the status topic (rule 5's question). */
    volatile boolean canWrite = true;
    /** The answer to rule 5's questions while not null: one the test completes when it will (a slow producer). */
    volatile CompletableFuture<Boolean> answer;
    private final List<List<String>> writeChecks = new ArrayList<>();
    private final List<String> rewrites = new ArrayList<>();

    FakeConnect(Topic topic) {
        this.topic = topic;
    }

    /**
     * Run once with the next status the agent writes, before it lands: another worker's record of its key that lands
     * first, after the agent's checks (its agent handed it to its own producer at the same moment), or null.
     */
    volatile Consumer<StatusUpdate> landsFirst;

    /** The agent's fall back (the store's original method, called by the sender); its topic has one worker. */
    @Override
    public boolean write(StatusUpdate update) {
        Consumer<StatusUpdate> first;
        synchronized (this) {
            agentWrites.add(update);
            first = landsFirst;
            landsFirst = null;
        }
        if (first != null) {
            first.accept(update);
        }
        original(update);
        return true;
    }

    /** The original method run by the worker's thread itself (the advice let it through). */
    void original(StatusUpdate update) {
        synchronized (this) {
            if (holding) {
                inFlight.add(update);
                return;
            }
        }
        topic.append(update.key, update.trace, "connect", Topic.value(update));
    }

    /** Lands what was in flight, in order (Connect's re-sends finally succeed). */
    void release() {
        List<StatusUpdate> landing;
        synchronized (this) {
            holding = false;
            landing = new ArrayList<>(inFlight);
            inFlight.clear();
        }
        for (StatusUpdate u : landing) {
            topic.append(u.key, u.trace, "connect", Topic.value(u));
        }
    }

    synchronized List<StatusUpdate> agentWrites() {
        return new ArrayList<>(agentWrites);
    }

    /** Answers at once, as a worker's producer whose brokers answer (or refuse) does, unless {@link #answer} is set. */
    @Override
    public synchronized CompletableFuture<Boolean> canWrite(Collection<String> keys) {
        writeChecks.add(new ArrayList<>(keys));
        CompletableFuture<Boolean> held = answer;
        return held != null ? held : CompletableFuture.completedFuture(canWrite);
    }

    /**
     * A record written again (the agent's undo of a held status that landed over it): lands at once if still wanted,
     * as the worker's producer's first attempt does when its broker answers (the tests here hold no rewrite); its
     * marker is the rewritten record's ("tombstone" for a tombstone, as the tests mark another worker's).
     */
    @Override
    public void rewrite(String key, byte[] value, BooleanSupplier wanted) {
        synchronized (this) {
            rewrites.add(key);
        }
        if (wanted.getAsBoolean()) {
            topic.append(key, value == null ? "tombstone" : Topic.marker(value), "connect", value);
        }
    }

    /** The keys the agent wrote a record of again. */
    synchronized List<String> rewrites() {
        return new ArrayList<>(rewrites);
    }

    /** The keys of each question the agent asked about the worker's own producer. */
    synchronized List<List<String>> writeChecks() {
        return new ArrayList<>(writeChecks);
    }

    @Override
    public synchronized boolean quiet(long timeoutMs) {
        Error fault = quietFails;
        if (fault != null) {
            throw fault;
        }
        return inFlight.isEmpty();
    }
}
