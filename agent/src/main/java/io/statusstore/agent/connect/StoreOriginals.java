package io.statusstore.agent.connect;

import io.statusstore.agent.Daemons;
import io.statusstore.agent.Warnings;
import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.path.ConnectPath;
import io.statusstore.agent.status.StatusUpdate;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.connect.runtime.AbstractStatus;
import org.apache.kafka.connect.runtime.ConnectorStatus;
import org.apache.kafka.connect.runtime.TaskStatus;
import org.apache.kafka.connect.runtime.TopicStatus;
import org.apache.kafka.connect.storage.StatusBackingStore;
import org.apache.kafka.connect.util.KafkaBasedLog;

import java.util.Collection;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/**
 * Connect's own path through the bound store: its original methods, and whether anything it started is still
 * in flight. Connect re-sends a failed write from its producer callback on a single retry thread (KAFKA-14902,
 * 3.5+), forever for retriable errors: a record is settled when its callback ran, and a re-send that callback
 * queued has run once a marker task queued after it has.
 */
final class StoreOriginals implements ConnectPath {
    private static final Runnable MARKER = () -> { };
    /** Where the probe records are handed to the producer: its send may block for metadata (max.block.ms). */
    private static final ExecutorService PROBES =
            Executors.newSingleThreadExecutor(Daemons.named("status-store-agent-probe"));

    /** Where a record is written again ({@link #rewrite}), and its failed attempts tried again after a pause. */
    private static final ScheduledExecutorService UNDO =
            Executors.newSingleThreadScheduledExecutor(Daemons.named("status-store-agent-undo"));
    /** The pause before a failed attempt to write a record again is made again. */
    private static final long UNDO_RETRY_MS = 100;
    /** How long the agent tries to write a record again: as long as Connect's producer may deliver one late. */
    private static final long UNDO_FOR_MS = 120_000;

    private final StatusBackingStore store;
    private final KafkaBasedLog<String, byte[]> log;
    private final SendCount sends;
    private final ExecutorService retryExecutor;
    private final StoreGeneration generation;
    private final AgentMetrics metrics;
    private final Warnings warnings = new Warnings();

    StoreOriginals(StatusBackingStore store, KafkaBasedLog<String, byte[]> log, SendCount sends,
                   ExecutorService retryExecutor, AgentMetrics metrics) {
        this.store = store;
        this.metrics = metrics;
        this.log = log;
        this.sends = sends;
        this.retryExecutor = retryExecutor;
        this.generation = new StoreGeneration(store);
    }

    /**
     * Runs the original method for {@code u}, a status the agent held: the store's generation, which that method sets
     * to the status's own, is taken back up to where it was before the record goes to the producer (and after the
     * method, which sets it even for a putSafe it drops), never lower: {@link StoreGeneration}; Connect's callbacks wait
     * meanwhile ({@link GenerationGate}). Not written at all when
     * the store has read another worker's newer status of its key ({@link #overtakenBy}).
     */
    @Override
    public boolean write(StatusUpdate u) {
        AbstractStatus<?> newer = overtakenBy(u);
        if (newer != null) {
            metrics.overtaken();
            warnings.warn("overtaken", "not writing through Connect a status held past its fence: the worker's store "
                    + "has read a newer status of its key from another worker since (" + u + "; read: worker "
                    + newer.workerId() + ", generation " + newer.generation() + "), which it would land over late");
            return false;
        }
        // Connect's callbacks judge no failed write while the store's generation is the held status's (GenerationGate).
        sends.gate.shut();
        try {
            original(u);
        } finally {
            sends.gate.open();
        }
        return true;
    }

    /** The store's original method for {@code u}, its generation kept where the worker moved it. */
    private void original(StatusUpdate u) {
        int before = generation.read();
        Runnable keep = () -> {
            generation.atLeast(before);
            sends.gate.open();
        };
        StoreHooks.original(u, keep, () -> {
            switch (u.kind) {
                case CONNECTOR:
                    if (u.safe) {
                        store.putSafe((ConnectorStatus) u.source);
                    } else {
                        store.put((ConnectorStatus) u.source);
                    }
                    break;
                case TASK:
                    if (u.safe) {
                        store.putSafe((TaskStatus) u.source);
                    } else {
                        store.put((TaskStatus) u.source);
                    }
                    break;
                case TOPIC:
                    store.put((TopicStatus) u.source);
                    break;
                case DELETE_TOPIC:
                    store.deleteTopic(u.connector, u.topic);
                    break;
                default:
                    throw new IllegalStateException(u.kind.toString());
            }
        });
    }

    /**
     * The status of {@code u}'s key the store read last, if it is another worker's of a higher generation, else null:
     * Connect's own safe-write rule (its cache entry's canWriteSafely), applied to every status the agent held. A stock
     * worker writes its status when asked, so a newer one from the worker the task or connector moved to lands after
     * it; the agent writes a held status late, and Connect's store reads the last record of a key as its status.
     */
    private AbstractStatus<?> overtakenBy(StatusUpdate u) {
        if (!(u.source instanceof AbstractStatus)) {
            return null;
        }
        AbstractStatus<?> read;
        if (u.kind == StatusUpdate.Kind.CONNECTOR) {
            read = store.get(u.connector);
        } else if (u.kind == StatusUpdate.Kind.TASK) {
            // Through its erasure: ConnectorTaskId is a record in Connect 4.x, a class the agent cannot name (Java 11).
            Object id = ((AbstractStatus<?>) u.source).id();
            try {
                read = (AbstractStatus<?>) StatusBackingStore.class.getMethod("get", id.getClass()).invoke(store, id);
            } catch (ReflectiveOperationException e) {
                return null;
            }
        } else {
            return null;
        }
        if (read == null || read.workerId() == null || read.workerId().equals(u.workerId)
                || read.generation() <= u.generation) {
            return null;
        }
        return read;
    }

    @Override
    public void rewrite(String key, byte[] value, BooleanSupplier wanted) {
        long until = System.nanoTime() / 1_000_000 + UNDO_FOR_MS;
        UNDO.execute(() -> rewriteNow(key, value, wanted, until));
    }

    /**
     * One attempt of {@link #rewrite}, on the agent's own thread (the send may block for metadata): the record goes
     * past Connect's cache and rules, as the worker's producer sends any record; a retriable failure is tried again
     * after a pause while it is still wanted (no record of the key read since) and until {@code until}.
     */
    private void rewriteNow(String key, byte[] value, BooleanSupplier wanted, long until) {
        if (!wanted.getAsBoolean()) {
            return;
        }
        try {
            log.send(key, value, (metadata, error) -> {
                if (error == null) {
                    return;
                }
                if (error instanceof RetriableException && System.nanoTime() / 1_000_000 < until) {
                    UNDO.schedule(() -> rewriteNow(key, value, wanted, until), UNDO_RETRY_MS, TimeUnit.MILLISECONDS);
                } else {
                    warnings.warn("undo failed", "could not write the record of " + key + " again (" + error
                            + "): the older status written late stays over it");
                }
            });
        } catch (Throwable t) {
            warnings.warn("undo failed", "could not write the record of " + key + " again (" + t
                    + "): the older status written late stays over it");
        }
    }

    @Override
    public boolean quiet(long timeoutMs) {
        long started = sends.started();
        if (StoreHooks.originalsRunning() > 0 || sends.completed() != started) {
            return false;
        }
        if (retryExecutor != null) {
            try {
                retryExecutor.submit(MARKER).get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (RejectedExecutionException e) {
                // Shut down with the store: no re-send can run any more.
            } catch (TimeoutException e) {
                return false;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            } catch (ExecutionException e) {
                return false;
            }
        }
        return StoreHooks.originalsRunning() == 0 && sends.started() == started && sends.completed() == started;
    }

    @Override
    public CompletableFuture<Boolean> canWrite(Collection<String> keys) {
        CompletableFuture<Boolean> wrote = new CompletableFuture<>();
        PROBES.execute(() -> {
            try {
                int partitions = log.partitionCount();
                Set<Integer> targets = new TreeSet<>();
                for (String key : keys) {
                    targets.add(ProbeRecord.partition(key, partitions));
                }
                AtomicInteger left = new AtomicInteger(targets.size());
                for (int partition : targets) {
                    log.send(ProbeRecord.keyFor(partition, partitions), null, (metadata, error) -> {
                        if (error != null) {
                            wrote.complete(false);
                        } else if (left.decrementAndGet() == 0) {
                            wrote.complete(true);
                        }
                    });
                }
            } catch (Throwable t) {
                wrote.complete(false);
            }
        });
        return wrote;
    }
}
