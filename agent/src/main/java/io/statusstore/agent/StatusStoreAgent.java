package io.statusstore.agent;

import io.statusstore.agent.connect.StoreHooks;
import io.statusstore.agent.connect.StoreInterception;

import java.lang.instrument.Instrumentation;

/**
 * The agent's entry point: {@code -javaagent:status-store-agent.jar=url=...,token.file=...}. It parses the
 * options once and installs the interception; everything else happens when the worker builds its status store.
 * It never stops a worker from starting: any error is one log line, and the worker runs on its own store.
 */
public final class StatusStoreAgent {
    private StatusStoreAgent() {
    }

    public static void premain(String args, Instrumentation instrumentation) {
        attach(args, instrumentation);
    }

    public static void agentmain(String args, Instrumentation instrumentation) {
        attach(args, instrumentation);
    }

    private static void attach(String args, Instrumentation instrumentation) {
        try {
            AgentOptions options = AgentOptions.parse(args, System.getenv());
            StoreHooks.arm(options);
            StoreInterception.install(instrumentation);
            AgentLog.info("attached (" + version() + "; " + options.describe() + ")");
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
