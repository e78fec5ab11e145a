package io.statusstore.agent;

import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The agent's log lines, through the worker's own logging: SLF4J when the agent's class loader reaches it
 * (Connect's classpath has it, and the agent jar sits on the same system class path), else java.util.logging.
 * Every line starts with "status-store agent:" so an operator can find them all.
 */
public final class AgentLog {
    private static final String NAME = "io.statusstore.agent";
    private static final String PREFIX = "status-store agent: ";
    private static volatile Sink sink;

    private AgentLog() {
    }

    public static void info(String message) {
        sink().write(false, PREFIX + message, null);
    }

    public static void warn(String message) {
        sink().write(true, PREFIX + message, null);
    }

    public static void warn(String message, Throwable error) {
        sink().write(true, PREFIX + message, error);
    }

    private static Sink sink() {
        Sink s = sink;
        if (s == null) {
            s = slf4jReachable() ? new Slf4jSink() : new JulSink();
            sink = s;
        }
        return s;
    }

    private static boolean slf4jReachable() {
        try {
            Class.forName("org.slf4j.LoggerFactory", false, AgentLog.class.getClassLoader());
            return true;
        } catch (Throwable e) {
            return false;
        }
    }

    private interface Sink {
        void write(boolean warning, String line, Throwable error);
    }

    /** Loaded only when SLF4J is on the class path. */
    private static final class Slf4jSink implements Sink {
        private final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(NAME);

        @Override
        public void write(boolean warning, String line, Throwable error) {
            if (warning) {
                log.warn(line, error);
            } else {
                log.info(line, error);
            }
        }
    }

    private static final class JulSink implements Sink {
        private final Logger log = Logger.getLogger(NAME);

        @Override
        public void write(boolean warning, String line, Throwable error) {
            log.log(warning ? Level.WARNING : Level.INFO, line, error);
        }
    }
}
