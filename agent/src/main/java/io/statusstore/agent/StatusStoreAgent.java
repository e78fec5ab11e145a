package io.statusstore.agent;

import io.statusstore.agent.connect.StoreHooks;
import io.statusstore.agent.connect.StoreInterception;
import io.statusstore.agent.json.Jackson;

import java.lang.instrument.Instrumentation;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The agent's entry point: {@code -javaagent:status-store-agent.jar=url=...,token.file=...} in {@code KAFKA_OPTS}
 * or {@code JAVA_TOOL_OPTIONS}, its options also from {@code STATUS_STORE_AGENT_*} variables and a file
 * ({@link AgentOptions}). It reads the options once and installs the interception; everything else happens when
 * the worker builds its status store. It never stops a worker from starting: any error is one log line, and the
 * worker runs on its own store; {@code enabled=false} is one line too.
 */
public final class StatusStoreAgent {
    // Both KAFKA_OPTS and JAVA_TOOL_OPTIONS may carry the agent (one set by a platform, one by its user): the JVM
    // then starts it twice (JAVA_TOOL_OPTIONS' first), and the first one's options hold.
    private static final AtomicBoolean STARTED = new AtomicBoolean();

    private StatusStoreAgent() {
    }

    public static void premain(String args, Instrumentation instrumentation) {
        attach(args, instrumentation);
    }

    public static void agentmain(String args, Instrumentation instrumentation) {
        attach(args, instrumentation);
    }

    private static void attach(String args, Instrumentation instrumentation) {
        if (!STARTED.compareAndSet(false, true)) {
            AgentLog.warn("given twice to this JVM (KAFKA_OPTS and JAVA_TOOL_OPTIONS both name it?): the second is "
                    + "ignored, the first one's options hold");
            return;
        }
        try {
            AgentOptions options = AgentOptions.parse(args, System.getenv());
            if (!options.enabled) {
                AgentLog.info("disabled (" + options.disabledBy() + "); the worker runs on its own status store");
                return;
            }
            // The agent's JSON is the worker's Jackson: where the agent's loader has none, nothing of the agent that
            // speaks to the sidecar could run, so it stays out before touching Connect.
            ClassLoader loader = StatusStoreAgent.class.getClassLoader();
            String noJackson = Jackson.missing(loader);
            if (noJackson != null) {
                AgentLog.warn("not attached: " + noJackson + "; the worker runs on its own status store");
                return;
            }
            StoreHooks.arm(options);
            StoreInterception.install(instrumentation);
            AgentLog.info("attached (" + version() + ", " + Jackson.version(loader) + "; " + options.describe() + ")");
        } catch (AgentOptions.OptionsException e) {
            AgentLog.warn("not attached: " + e.getMessage() + "; the worker runs on its own status store");
        } catch (Throwable t) {
            AgentLog.warn("not attached: " + t + "; the worker runs on its own status store", t);
        }
    }

    private static String version() {
        String version = StatusStoreAgent.class.getPackage().getImplementationVersion();
        return "status-store-agent " + (version == null ? "dev" : version);
    }
}
