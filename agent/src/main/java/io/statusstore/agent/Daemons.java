package io.statusstore.agent;

import java.util.concurrent.ThreadFactory;

/** The agent's own threads: named, and daemons, so that none keeps a worker's JVM from exiting. */
public final class Daemons {
    private Daemons() {
    }

    /** A factory of daemon threads named {@code name}. */
    public static ThreadFactory named(String name) {
        return task -> {
            Thread thread = new Thread(task, name);
            thread.setDaemon(true);
            return thread;
        };
    }
}
