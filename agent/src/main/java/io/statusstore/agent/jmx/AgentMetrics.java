package io.statusstore.agent.jmx;

import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntSupplier;

/**
 * The agent's counters: KIP-1278's three, fed from the outcomes the sidecar reports for this worker's writes,
 * and the agent's own figures. Plain atomics; {@link MetricsMBeans} shows them in JMX.
 */
public final class AgentMetrics {
    final AtomicLong retries = new AtomicLong();
    final AtomicLong failures = new AtomicLong();
    final AtomicLong successes = new AtomicLong();
    final AtomicLong handedOver = new AtomicLong();
    final AtomicLong fallenBack = new AtomicLong();
    final AtomicLong refused = new AtomicLong();
    final AtomicLong dropped = new AtomicLong();
    final AtomicLong switches = new AtomicLong();
    final AtomicLong overtaken = new AtomicLong();
    final AtomicLong undone = new AtomicLong();
    private volatile IntSupplier queuedKeys = () -> 0;
    private volatile boolean onSidecar;

    /** An outcome the sidecar reported: success/failure +1 for written/failed, retries += attempts - 1 (KIP-1278). */
    public void outcome(String result, long attempts) {
        if ("written".equals(result)) {
            successes.incrementAndGet();
        } else if ("failed".equals(result)) {
            failures.incrementAndGet();
        } else {
            return;
        }
        retries.addAndGet(Math.max(0, attempts - 1));
    }

    /** The sidecar took a write (pending). */
    public void handedOver() {
        handedOver.incrementAndGet();
    }

    /** A write went through Connect's own store methods while the agent was attached. */
    public void fellBack() {
        fallenBack.incrementAndGet();
    }

    public void refused() {
        refused.incrementAndGet();
    }

    public void dropped() {
        dropped.incrementAndGet();
    }

    /** A status the agent held was not written late: the worker's store read another worker's newer one of its key. */
    public void overtaken() {
        overtaken.incrementAndGet();
    }

    /** A held status landed right after a record of its key no check saw, which the agent wrote again. */
    public void undone() {
        undone.incrementAndGet();
    }

    /** The agent switched path (to or from the sidecar). */
    public void switched(boolean nowOnSidecar) {
        switches.incrementAndGet();
        onSidecar = nowOnSidecar;
    }

    public void queuedKeys(IntSupplier supplier) {
        queuedKeys = supplier;
    }

    public long successTotal() {
        return successes.get();
    }

    public long failureTotal() {
        return failures.get();
    }

    public long retryTotal() {
        return retries.get();
    }

    public long handedOverTotal() {
        return handedOver.get();
    }

    public long fallenBackTotal() {
        return fallenBack.get();
    }

    public long refusedTotal() {
        return refused.get();
    }

    public long droppedTotal() {
        return dropped.get();
    }

    public long overtakenTotal() {
        return overtaken.get();
    }

    public long undoneTotal() {
        return undone.get();
    }

    public long switchesTotal() {
        return switches.get();
    }

    public int queuedKeys() {
        return queuedKeys.getAsInt();
    }

    public boolean onSidecar() {
        return onSidecar;
    }
}
