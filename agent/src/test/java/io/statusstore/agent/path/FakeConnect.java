package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

import java.util.ArrayList;
import java.util.List;

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

    FakeConnect(Topic topic) {
        this.topic = topic;
    }

    /** The agent's fall back (the store's original method, called by the sender). */
    @Override
    public void write(StatusUpdate update) {
        synchronized (this) {
            agentWrites.add(update);
        }
        original(update);
    }

    /** The original method run by the worker's thread itself (the advice let it through). */
    void original(StatusUpdate update) {
        synchronized (this) {
            if (holding) {
                inFlight.add(update);
                return;
            }
        }
        topic.append(update.key, update.trace, "connect");
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
            topic.append(u.key, u.trace, "connect");
        }
    }

    synchronized List<StatusUpdate> agentWrites() {
        return new ArrayList<>(agentWrites);
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
