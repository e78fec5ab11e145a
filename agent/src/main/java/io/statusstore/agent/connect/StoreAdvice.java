package io.statusstore.agent.connect;

import net.bytebuddy.asm.Advice;
import net.bytebuddy.implementation.bytecode.assign.Assigner;

/**
 * The code ByteBuddy inlines into Connect's classes. Each piece only calls {@link StoreHooks} and suppresses
 * anything it throws: the worst an agent failure can do is let Connect's own method run.
 */
public final class StoreAdvice {
    private StoreAdvice() {
    }

    /** put/putSafe: skipped (the agent took the write) when the hook answers true. */
    public static final class Write {
        private Write() {
        }

        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class, suppress = Throwable.class)
        static boolean enter(@Advice.This Object store, @Advice.Origin("#m") String method,
                             @Advice.Argument(0) Object status) {
            return StoreHooks.onWrite(store, "putSafe".equals(method), status);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Enter boolean taken) {
            StoreHooks.afterWrite(taken);
        }
    }

    /** deleteTopic(connector, topic): like a write. */
    public static final class DeleteTopic {
        private DeleteTopic() {
        }

        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class, suppress = Throwable.class)
        static boolean enter(@Advice.This Object store, @Advice.Argument(0) String connector,
                             @Advice.Argument(1) String topic) {
            return StoreHooks.onDeleteTopic(store, connector, topic);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Enter boolean taken) {
            StoreHooks.afterWrite(taken);
        }
    }

    /** configure(WorkerConfig), once it succeeded: the agent learns the worker's cluster and status topic. */
    public static final class Configure {
        private Configure() {
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object store, @Advice.Argument(0) Object config, @Advice.Thrown Throwable thrown) {
            if (thrown == null) {
                StoreHooks.onConfigure(store, config);
            }
        }
    }

    /** start(), once the store read its topic: the agent's sender starts. */
    public static final class Start {
        private Start() {
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.This Object store, @Advice.Thrown Throwable thrown) {
            if (thrown == null) {
                StoreHooks.onStart(store);
            }
        }
    }

    /** stop(): before Connect's stop runs, everything unsettled goes to the sidecar or Connect's own path. */
    public static final class Stop {
        private Stop() {
        }

        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.This Object store) {
            StoreHooks.onStop(store);
        }
    }

    /** flush(): Connect's promise that statuses are written before a rebalance, kept for the sidecar's too. */
    public static final class Flush {
        private Flush() {
        }

        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.This Object store) {
            StoreHooks.onFlush(store);
        }
    }

    /** read(ConsumerRecord): every record Connect's store reads back, before its own read rules. */
    public static final class Read {
        private Read() {
        }

        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.This Object store, @Advice.Argument(0) Object record) {
            StoreHooks.onRead(store, record);
        }
    }

    /** KafkaBasedLog.send(key, value, callback): the status store's records are counted until their outcome. */
    public static final class LogSend {
        private LogSend() {
        }

        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.This Object log, @Advice.Argument(0) Object key, @Advice.Argument(1) Object value,
                          @Advice.Argument(value = 2, readOnly = false, typing = Assigner.Typing.DYNAMIC) Object callback) {
            callback = StoreHooks.onLogSend(log, key, value, callback);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(2) Object callback, @Advice.Thrown Throwable thrown) {
            if (thrown != null) {
                StoreHooks.afterLogSendThrew(callback);
            }
        }
    }
}
