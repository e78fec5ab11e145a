package io.statusstore.agent;

import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * The agent's options as operators give them to the agents they know (OpenTelemetry's, Elastic's): the
 * {@code -javaagent:jar=key=value,...} string, environment variables ({@code STATUS_STORE_AGENT_} and the key in
 * upper case, {@code .} and {@code -} as {@code _}: {@code STATUS_STORE_AGENT_URL}), and a properties file named
 * by {@code config.file} (in the string or {@code STATUS_STORE_AGENT_CONFIG_FILE}). The most specific wins: the
 * string, then the environment, then the file. Each value remembers where it came from, for the log.
 */
final class OptionSources {
    /** The environment variables' prefix. */
    static final String ENV_PREFIX = "STATUS_STORE_AGENT_";
    /** The option that names the properties file. */
    static final String CONFIG_FILE = "config.file";
    static final String STRING = "the -javaagent string";

    private final Map<String, String> values = new HashMap<>();
    private final Map<String, String> origins = new HashMap<>();
    private final List<String> used = new ArrayList<>();

    private OptionSources() {
    }

    /**
     * Every option given, from the three sources; {@code known} are the option names (without config.file).
     * Reads the file only when {@code enabled} is not already decided false by the string or the environment.
     */
    static OptionSources gather(String args, Map<String, String> env, Collection<String> known)
            throws AgentOptions.OptionsException {
        OptionSources sources = new OptionSources();
        Map<String, String> fromString = fromString(args, known);
        Map<String, String> fromEnv = fromEnvironment(env, known);
        sources.add(fromString, STRING, false);
        sources.add(fromEnv, ENV_PREFIX + "* variables", true);
        String file = sources.values.get(CONFIG_FILE);
        if (file != null && !"false".equalsIgnoreCase(sources.values.get("enabled"))) {
            sources.add(fromFile(file, known), "the file " + file, false);
        }
        return sources;
    }

    /** The value of an option, or null when no source gives it. */
    String get(String key) {
        return values.get(key);
    }

    /** Where an option's value came from (for the log), or null. */
    String origin(String key) {
        return origins.get(key);
    }

    /** These options only, with their origins (the rest not read: the agent is off). */
    OptionSources keeping(String key) {
        OptionSources kept = new OptionSources();
        if (values.containsKey(key)) {
            kept.values.put(key, values.get(key));
            kept.origins.put(key, origins.get(key));
        }
        kept.used.addAll(used);
        return kept;
    }

    /** The sources that gave at least one option, most specific first ("defaults" when none). */
    String used() {
        return used.isEmpty() ? "defaults" : String.join(", ", used);
    }

    /** The environment variable of an option: {@code max.keys} is {@code STATUS_STORE_AGENT_MAX_KEYS}. */
    static String variable(String key) {
        return ENV_PREFIX + key.toUpperCase(Locale.ROOT).replace('.', '_').replace('-', '_');
    }

    /** Adds what a less specific source gives, under what the more specific ones gave; {@code byVariable}: each
     * value's origin is its variable's name. */
    private void add(Map<String, String> given, String source, boolean byVariable) {
        boolean any = false;
        for (Map.Entry<String, String> e : given.entrySet()) {
            if (!values.containsKey(e.getKey())) {
                values.put(e.getKey(), e.getValue());
                origins.put(e.getKey(), byVariable ? variable(e.getKey()) : source);
                any = true;
            }
        }
        if (any) {
            used.add(source);
        }
    }

    private static Map<String, String> fromString(String args, Collection<String> known)
            throws AgentOptions.OptionsException {
        Map<String, String> values = new HashMap<>();
        if (args == null || args.trim().isEmpty()) {
            return values;
        }
        for (String part : args.split(",", -1)) {
            int eq = part.indexOf('=');
            if (eq <= 0) {
                throw new AgentOptions.OptionsException("option '" + part.trim() + "' is not key=value");
            }
            String key = part.substring(0, eq).trim();
            checkKnown(key, known, "option '" + key + "'");
            if (values.put(key, part.substring(eq + 1).trim()) != null) {
                throw new AgentOptions.OptionsException("option '" + key + "' given twice");
            }
        }
        return values;
    }

    /** The STATUS_STORE_AGENT_* variables; one set but empty counts as not set, as an empty env entry means. */
    private static Map<String, String> fromEnvironment(Map<String, String> env, Collection<String> known)
            throws AgentOptions.OptionsException {
        Map<String, String> byVariable = new HashMap<>();
        for (String key : known) {
            byVariable.put(variable(key), key);
        }
        byVariable.put(variable(CONFIG_FILE), CONFIG_FILE);
        Map<String, String> values = new HashMap<>();
        // Sorted, so that the first unknown variable named is always the same one.
        for (Map.Entry<String, String> e : new TreeMap<>(env).entrySet()) {
            if (!e.getKey().startsWith(ENV_PREFIX)) {
                continue;
            }
            String key = byVariable.get(e.getKey());
            if (key == null) {
                throw new AgentOptions.OptionsException("unknown environment variable " + e.getKey() + " (known: "
                        + String.join(", ", new TreeMap<>(byVariable).keySet()) + ")");
            }
            String value = e.getValue().trim();
            if (!value.isEmpty()) {
                values.put(key, value);
            }
        }
        return values;
    }

    private static Map<String, String> fromFile(String file, Collection<String> known)
            throws AgentOptions.OptionsException {
        if (file.isEmpty()) {
            throw new AgentOptions.OptionsException(CONFIG_FILE + " is empty");
        }
        Properties properties = new Properties();
        try (Reader reader = new InputStreamReader(Files.newInputStream(Paths.get(file)), StandardCharsets.UTF_8)) {
            properties.load(reader);
        } catch (IOException | RuntimeException e) {
            throw new AgentOptions.OptionsException(CONFIG_FILE + " '" + file + "' cannot be read (" + e + ")");
        }
        Map<String, String> values = new HashMap<>();
        for (String key : new TreeMap<>(toMap(properties)).keySet()) {
            if (key.equals(CONFIG_FILE)) {
                throw new AgentOptions.OptionsException("the file '" + file + "' names another " + CONFIG_FILE
                        + ": options come from one file");
            }
            checkKnown(key, known, "option '" + key + "' in '" + file + "'");
            values.put(key, properties.getProperty(key).trim());
        }
        return values;
    }

    private static Map<String, String> toMap(Properties properties) {
        Map<String, String> map = new HashMap<>();
        for (String key : properties.stringPropertyNames()) {
            map.put(key, properties.getProperty(key));
        }
        return map;
    }

    private static void checkKnown(String key, Collection<String> known, String what)
            throws AgentOptions.OptionsException {
        if (!known.contains(key) && !key.equals(CONFIG_FILE)) {
            throw new AgentOptions.OptionsException("unknown " + what + " (known: " + String.join(", ", known)
                    + ", " + CONFIG_FILE + ")");
        }
    }
}
