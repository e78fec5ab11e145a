package io.statusstore.agent;

import java.util.HashMap;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The agent's warnings, each cause at most once per {@link #INTERVAL_MS}: a cause that repeats meanwhile is
 * counted, and its next line says how often it came. A stack trace is logged with a cause's first line only, so a
 * fault that repeats every second costs one line a minute, never a trace a second.
 */
public final class Warnings {
    /** A cause's lines are at least this far apart. */
    public static final long INTERVAL_MS = 60_000;

    private final LongSupplier clockMs;
    private final Map<String, Cause> causes = new HashMap<>();

    public Warnings() {
        this(() -> System.nanoTime() / 1_000_000);
    }

    /** With its own clock (milliseconds), for tests. */
    public Warnings(LongSupplier clockMs) {
        this.clockMs = clockMs;
    }

    /** Logs {@code line} unless {@code cause} was logged within the interval; returns whether it logged. */
    public boolean warn(String cause, String line) {
        return warn(cause, line, null);
    }

    /** As {@link #warn(String, String)}, with {@code error}'s stack trace on the cause's first line only. */
    public boolean warn(String cause, String line, Throwable error) {
        String text;
        Throwable trace;
        synchronized (this) {
            long now = clockMs.getAsLong();
            Cause c = causes.get(cause);
            if (c != null && now - c.loggedAt < INTERVAL_MS) {
                c.suppressed++;
                return false;
            }
            boolean first = c == null;
            if (first) {
                c = new Cause();
                causes.put(cause, c);
            }
            text = c.suppressed > 0 ? line + " (" + c.suppressed + " more like it since the last such line)" : line;
            trace = first ? error : null;
            c.loggedAt = now;
            c.suppressed = 0;
        }
        if (trace != null) {
            AgentLog.warn(text, trace);
        } else {
            AgentLog.warn(text);
        }
        return true;
    }

    /**
     * Counts a repeat of {@code cause} that is not to be logged (a line said again only when what it says changes): the
     * cause's next line counts it. A cause never warned of has no line to count it in, and is left alone.
     */
    public synchronized void repeated(String cause) {
        Cause c = causes.get(cause);
        if (c != null) {
            c.suppressed++;
        }
    }

    private static final class Cause {
        long loggedAt;
        long suppressed;
    }
}
