package io.statusstore.agent.connect;

import io.statusstore.agent.AgentLog;
import io.statusstore.agent.AgentOptions;
import io.statusstore.agent.Warnings;
import io.statusstore.agent.status.StatusUpdate;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.connect.runtime.WorkerConfig;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * The entry points {@link StoreAdvice} calls from inside Connect's classes. Each catches everything: an agent
 * fault lets Connect's own method run, and is logged at most once a minute per kind of fault (its stack trace the
 * first time), its repeats counted.
 *
 * <p>The agent binds the first KafkaStatusBackingStore configured in the JVM (a Connect worker has one); any
 * other runs untouched. The agent's own calls to the original methods (the fall back) pass through the
 * advice with a thread-local bypass.
 */
public final class StoreHooks {
    private static final ThreadLocal<Boolean> BYPASS = new ThreadLocal<>();
    /** The status the agent hands the original method now (the drain), for the record it sends. */
    private static final ThreadLocal<StatusUpdate> DRAINING = new ThreadLocal<>();
    /** What the drain runs as its record goes to the producer: the store's generation kept (StoreGeneration). */
    private static final ThreadLocal<Runnable> BEFORE_SEND = new ThreadLocal<>();
    private static final String CONNECTOR_KEY = "status-connector-";
    /** Original write methods running now, in any thread: Connect's path is quiet only at zero. */
    private static final AtomicInteger ORIGINALS_RUNNING = new AtomicInteger();
    private static volatile AgentOptions options;
    /** The agent's warnings in this JVM: the hooks' own and the bound store's, so that each cause's limit holds. */
    private static volatile Warnings warnings = new Warnings();
    private static volatile BoundStore bound;

    private StoreHooks() {
    }

    /** Arms the hooks with the agent's options (premain). */
    public static void arm(AgentOptions agentOptions) {
        options = agentOptions;
    }

    /** As {@link #arm(AgentOptions)}, the agent's lines going through {@code agentWarnings} (tests: their own clock). */
    static void arm(AgentOptions agentOptions, Warnings agentWarnings) {
        warnings = agentWarnings;
        options = agentOptions;
    }

    /** For tests: forgets the options, any bound store and the warnings' counts. */
    static void disarm() {
        options = null;
        bound = null;
        warnings = new Warnings();
    }

    static BoundStore bound() {
        return bound;
    }

    public static boolean onWrite(Object store, boolean safe, Object status) {
        ORIGINALS_RUNNING.incrementAndGet();
        try {
            BoundStore b = bound;
            if (b == null || b.store != store || BYPASS.get() != null) {
                return false;
            }
            StatusUpdate update = StatusReader.read(status, safe);
            // A held status the agent wrote through Connect's path is not sent again over this newer one.
            b.drained.superseded(update.key);
            return taken(b, b.offer(update));
        } catch (Throwable t) {
            fault(t);
            return false;
        }
    }

    public static boolean onDeleteTopic(Object store, String connector, String topic) {
        ORIGINALS_RUNNING.incrementAndGet();
        try {
            BoundStore b = bound;
            if (b == null || b.store != store || BYPASS.get() != null) {
                return false;
            }
            return taken(b, b.offer(StatusUpdate.deleteTopic(connector, topic)));
        } catch (Throwable t) {
            fault(t);
            return false;
        }
    }

    /** After a write method: one original fewer running, unless the agent took the write. */
    public static void afterWrite(boolean taken) {
        if (!taken) {
            ORIGINALS_RUNNING.decrementAndGet();
        }
    }

    public static void onConfigure(Object store, Object config) {
        try {
            AgentOptions o = options;
            if (o == null) {
                return;
            }
            synchronized (StoreHooks.class) {
                BoundStore b = bound;
                if (b != null && b.store != store && !b.stopped()) {
                    AgentLog.warn("another KafkaStatusBackingStore in this JVM (status topic '"
                            + ((WorkerConfig) config).getString("status.storage.topic")
                            + "') stays on Connect's own path: the agent serves the first one only");
                    return;
                }
                bound = BoundStore.bind(store, (WorkerConfig) config, o, warnings);
            }
        } catch (Throwable t) {
            AgentLog.warn("could not bind the worker's status store (" + t + "): the worker runs on its own store", t);
        }
    }

    public static void onStart(Object store) {
        try {
            BoundStore b = bound;
            if (b != null && b.store == store) {
                b.start();
            }
        } catch (Throwable t) {
            fault(t);
        }
    }

    public static void onStop(Object store) {
        try {
            BoundStore b = bound;
            if (b != null && b.store == store && BYPASS.get() == null) {
                b.stop();
            }
        } catch (InterruptedException e) {
            interrupted("stop");
        } catch (Throwable t) {
            fault(t);
        }
    }

    public static void onFlush(Object store) {
        try {
            BoundStore b = bound;
            if (b != null && b.store == store && BYPASS.get() == null) {
                b.flush();
            }
        } catch (InterruptedException e) {
            interrupted("flush");
        } catch (Throwable t) {
            fault(t);
        }
    }

    /** Connect's store read a record of its topic: the agent checks the sidecar's "written" against it. */
    public static void onRead(Object store, Object record) {
        try {
            BoundStore b = bound;
            if (b != null && b.store == store) {
                ConsumerRecord<?, ?> r = (ConsumerRecord<?, ?>) record;
                String key = (String) r.key();
                b.readBack.read(key, (byte[]) r.value());
                if (r.value() == null && key != null) {
                    b.drained.deleted(key, key.startsWith(CONNECTOR_KEY) ? key.substring(CONNECTOR_KEY.length()) : null);
                }
            }
        } catch (Throwable t) {
            fault(t);
        }
    }

    /**
     * Connect's callback, or a counting one when the record is the bound status store's (and, for a status the agent
     * held and now writes through Connect's path, one that sees its failed attempts tried again: {@link DrainedWrites}).
     */
    public static Object onLogSend(Object log, Object key, Object value, Object callback) {
        try {
            BoundStore b = bound;
            if (b != null && b.kafkaLog == log) {
                Callback connects = (Callback) callback;
                StatusUpdate draining = BYPASS.get() != null ? DRAINING.get() : null;
                Runnable beforeSend = draining != null ? BEFORE_SEND.get() : null;
                if (beforeSend != null) {
                    beforeSend.run();
                }
                Callback watched = draining != null && key instanceof String
                        ? b.drained.sent(draining, (String) key, connects) : b.drained.resent(connects);
                return b.sends.wrap(watched);
            }
        } catch (Throwable t) {
            fault(t);
        }
        return callback;
    }

    /** The send threw instead of calling back: its record is settled all the same. */
    public static void afterLogSendThrew(Object callback) {
        if (callback instanceof SendCount.Counting) {
            ((SendCount.Counting) callback).done();
        }
    }

    /**
     * Runs the store's original method for {@code update} on the agent's behalf (the fall back), past the advice;
     * {@code beforeSend} runs as its record goes to the producer, and again once the method returns.
     */
    static void original(StatusUpdate update, Runnable beforeSend, Runnable call) {
        BYPASS.set(Boolean.TRUE);
        DRAINING.set(update);
        BEFORE_SEND.set(beforeSend);
        try {
            call.run();
        } finally {
            BYPASS.remove();
            DRAINING.remove();
            BEFORE_SEND.remove();
            beforeSend.run();
        }
    }

    static int originalsRunning() {
        return ORIGINALS_RUNNING.get();
    }

    private static boolean taken(BoundStore b, boolean taken) {
        if (taken) {
            ORIGINALS_RUNNING.decrementAndGet();
        } else {
            b.metrics.fellBack();
        }
        return taken;
    }

    /**
     * Connect's thread was interrupted while the agent waited in the store's {@code what}: the wait ends, and the
     * interrupt stays set for Connect's own method, as its producer's flush leaves it (Kafka's InterruptException).
     * Not a fault: what the agent holds goes on as after a wait that timed out.
     */
    private static void interrupted(String what) {
        Thread.currentThread().interrupt();
        warnings.warn("interrupted " + what, "the status store's " + what + " was interrupted while the agent waited "
                + "for the sidecar: the interrupt goes on to Connect; what was not settled goes on being handed");
    }

    private static void fault(Throwable t) {
        warnings.warn("fault " + t.getClass().getName(), "agent fault (the write went to Connect's own store)", t);
    }
}
