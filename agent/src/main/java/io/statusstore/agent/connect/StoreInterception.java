package io.statusstore.agent.connect;

import io.statusstore.agent.AgentLog;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.ClassFileLocator;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.pool.TypePool;
import net.bytebuddy.utility.JavaModule;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
import java.util.List;

import static net.bytebuddy.matcher.ElementMatchers.named;

/**
 * Installs {@link StoreAdvice} on Connect's KafkaStatusBackingStore and KafkaBasedLog when the worker loads
 * them, after checking them against {@link StoreShape}. A store that does not match gets one log line and is
 * left as it is.
 */
public final class StoreInterception {
    private StoreInterception() {
    }

    public static ClassFileTransformer install(Instrumentation instrumentation) {
        return new AgentBuilder.Default()
                .disableClassFormatChanges()
                .with(AgentBuilder.RedefinitionStrategy.RETRANSFORMATION)
                .with(new Errors())
                .type(named(StoreShape.KAFKA_BASED_LOG)).transform(StoreInterception::log)
                .type(named(StoreShape.STORE)).transform(StoreInterception::store)
                .installOn(instrumentation);
    }

    /** The interception of the store, or the builder unchanged (with one log line) when its shape differs. */
    static DynamicType.Builder<?> store(DynamicType.Builder<?> builder, TypeDescription type, ClassLoader loader,
                                        JavaModule module, ProtectionDomain domain) {
        List<String> missing = StoreShape.missing(type, pool(loader));
        if (!missing.isEmpty()) {
            AgentLog.warn("this worker's " + StoreShape.STORE + " is not one the agent knows (missing: "
                    + String.join(", ", missing) + "): it is left untouched and the worker runs on its own store");
            return builder;
        }
        return builder
                .visit(Advice.to(StoreAdvice.Write.class).on(StoreShape.WRITES))
                .visit(Advice.to(StoreAdvice.DeleteTopic.class).on(StoreShape.DELETE_TOPIC))
                .visit(Advice.to(StoreAdvice.Configure.class).on(StoreShape.CONFIGURE))
                .visit(Advice.to(StoreAdvice.Start.class).on(StoreShape.START))
                .visit(Advice.to(StoreAdvice.Stop.class).on(StoreShape.STOP))
                .visit(Advice.to(StoreAdvice.Flush.class).on(StoreShape.FLUSH))
                .visit(Advice.to(StoreAdvice.Read.class).on(StoreShape.READ));
    }

    /** The counting of the status store's records, inert for every other KafkaBasedLog. */
    static DynamicType.Builder<?> log(DynamicType.Builder<?> builder, TypeDescription type, ClassLoader loader,
                                      JavaModule module, ProtectionDomain domain) {
        if (type.getDeclaredMethods().filter(StoreShape.LOG_SEND).size() != 1) {
            return builder;
        }
        return builder.visit(Advice.to(StoreAdvice.LogSend.class).on(StoreShape.LOG_SEND));
    }

    private static TypePool pool(ClassLoader loader) {
        return TypePool.Default.of(loader == null ? ClassFileLocator.ForClassLoader.ofBootLoader()
                : ClassFileLocator.ForClassLoader.of(loader));
    }

    /** One line when ByteBuddy could not apply the interception: the class then stays as Connect built it. */
    private static final class Errors extends AgentBuilder.Listener.Adapter {
        @Override
        public void onError(String typeName, ClassLoader classLoader, JavaModule module, boolean loaded,
                            Throwable throwable) {
            AgentLog.warn("could not instrument " + typeName + " (" + throwable
                    + "): the worker runs on its own store", throwable);
        }
    }
}
