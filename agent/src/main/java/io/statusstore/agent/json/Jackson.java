package io.statusstore.agent.json;

/**
 * Whether the worker's class path gives the agent Jackson (jackson-core), which {@link JsonTree} and {@link JsonOut}
 * use. The agent never brings its own: a stock worker's launch script puts Connect's libs, Jackson among them (its
 * JSON converter needs it), on the system class path, where {@code -javaagent} puts the agent too. This class names
 * no Jackson type, so it loads where Jackson is missing.
 */
public final class Jackson {
    static final String FACTORY = "com.fasterxml.jackson.core.JsonFactory";
    private static final String VERSION = "com.fasterxml.jackson.core.json.PackageVersion";

    private Jackson() {
    }

    /** Why {@code loader} (the one that loaded the agent) cannot give the agent Jackson, or null when it can. */
    public static String missing(ClassLoader loader) {
        try {
            Class.forName(FACTORY, false, loader);
            return null;
        } catch (ClassNotFoundException | LinkageError e) {
            return "no Jackson (jackson-core, " + FACTORY + ") on the class path the agent was loaded from";
        }
    }

    /** The version of the Jackson {@code loader} gives, e.g. "jackson-core 2.16.2" (once {@link #missing} is null). */
    public static String version(ClassLoader loader) {
        try {
            Object version = Class.forName(VERSION, true, loader).getField("VERSION").get(null);
            return "jackson-core " + version;
        } catch (ReflectiveOperationException | LinkageError e) {
            return "jackson-core of an unknown version";
        }
    }
}
