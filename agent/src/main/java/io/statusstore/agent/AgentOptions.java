package io.statusstore.agent;

import io.statusstore.agent.sidecar.SidecarTls;

import java.io.IOException;
import java.net.MalformedURLException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

/**
 * The agent's options, read once: from the {@code -javaagent:jar=key=value,key=value} string, then
 * {@code STATUS_STORE_AGENT_*} environment variables, then the properties file {@code config.file} names, the
 * first that gives an option winning ({@link OptionSources}). {@code enabled=false} in any of them leaves the
 * worker's own store alone.
 *
 * <p>Every error is an {@link OptionsException} whose message names the option and what is wrong; the agent
 * then stays out of the worker's way (one log line), never stopping it.
 */
public final class AgentOptions {
    /** The environment variable that carries the sidecar's REST token when no token.file is given. */
    public static final String TOKEN_ENV = "STATUS_STORE_SIDECAR_REST_TOKEN";

    private static final Set<String> KEYS = new LinkedHashSet<>(Arrays.asList(
            "enabled", "url", "token.file", "max.keys", "batch.size", "fallback.after.ms", "lease.ms",
            "connect.timeout.ms", "read.timeout.ms", "poll.interval.ms", "probe.interval.ms",
            "quiet.timeout.ms", "stop.timeout.ms", "flush.timeout.ms", "tls.ca.file", "tls.cert.file",
            "tls.key.file"));

    /** False: the agent leaves the worker alone (enabled=false). */
    public final boolean enabled;
    public final URL url;
    /** The bearer token, or null when none is configured. */
    public final String token;
    /** The file the token was read from (read again when it changes: sidecar.Token), or null. */
    public final String tokenFile;
    /** The most keys the agent holds unsettled before it falls back to Connect's own path. */
    public final int maxKeys;
    public final int batchSize;
    /** How long the sidecar may be away (unreachable, refusing) before the agent falls back. */
    public final long fallbackAfterMs;
    /** How long the sidecar may write this agent's items after the agent's last request (the fence). */
    public final long leaseMs;
    public final int connectTimeoutMs;
    public final int readTimeoutMs;
    /** How often the agent asks for outcomes while items are pending at the sidecar. */
    public final long pollIntervalMs;
    /** How often the agent checks the sidecar while on Connect's own path. */
    public final long probeIntervalMs;
    /** How long the agent waits for Connect's own path to go quiet before handing over again. */
    public final long quietTimeoutMs;
    /** How long the store's stop() waits for the sidecar before handing what is unsettled to Connect. */
    public final long stopTimeoutMs;
    /**
     * How long the store's flush() waits for the writes taken before it to land (or be handed to Connect's producer):
     * as long as a stock worker's flush may wait for its producer, whose records fail after its delivery.timeout.ms
     * (120 s by default).
     */
    public final long flushTimeoutMs;
    /** The TLS of an https:// sidecar (its CA, this agent's certificate), or null: the JVM's defaults. */
    public final SidecarTls tls;
    /** Where the options came from, most specific first (for the log). */
    private final String sources;
    private final String enabledOrigin;

    private AgentOptions(OptionSources values, String token) throws OptionsException {
        this.sources = values.used();
        this.enabled = bool(values, "enabled", true);
        this.enabledOrigin = values.origin("enabled");
        this.url = parseUrl(values.get("url") == null ? "http://127.0.0.1:8084" : values.get("url"));
        this.token = token;
        this.tokenFile = token == null ? null : values.get("token.file");
        this.maxKeys = (int) number(values, "max.keys", 10_000, 1, Integer.MAX_VALUE);
        // The sidecar takes at most 10,000 updates a request and a lease of at most an hour (PROTOCOL.md).
        this.batchSize = (int) number(values, "batch.size", 500, 1, 10_000);
        this.fallbackAfterMs = number(values, "fallback.after.ms", 15_000, 0, Long.MAX_VALUE);
        this.leaseMs = number(values, "lease.ms", 4_000, 1, 3_600_000);
        this.connectTimeoutMs = (int) number(values, "connect.timeout.ms", 500, 1, Integer.MAX_VALUE);
        this.readTimeoutMs = (int) number(values, "read.timeout.ms", 2_000, 1, Integer.MAX_VALUE);
        this.pollIntervalMs = number(values, "poll.interval.ms", 1_000, 1, Long.MAX_VALUE);
        this.probeIntervalMs = number(values, "probe.interval.ms", 5_000, 1, Long.MAX_VALUE);
        this.quietTimeoutMs = number(values, "quiet.timeout.ms", 30_000, 0, Long.MAX_VALUE);
        this.stopTimeoutMs = number(values, "stop.timeout.ms", 5_000, 0, Long.MAX_VALUE);
        this.flushTimeoutMs = number(values, "flush.timeout.ms", 120_000, 0, Long.MAX_VALUE);
        this.tls = tls(values, url);
        long renewedWithin = (long) connectTimeoutMs + readTimeoutMs + pollIntervalMs;
        if (leaseMs <= renewedWithin) {
            // A healthy agent renews its lease at least every request deadline (connect + read timeout) plus a poll
            // interval: a shorter lease would expire under a sidecar that is merely busy.
            throw new OptionsException("lease.ms=" + leaseMs + " must exceed connect.timeout.ms + read.timeout.ms + "
                    + "poll.interval.ms (" + renewedWithin + ")");
        }
    }

    /**
     * Reads the options from the agent's argument string, then {@code env}'s {@code STATUS_STORE_AGENT_*}
     * variables, then the file {@code config.file} names; {@code env} also supplies {@value #TOKEN_ENV}. When
     * {@code enabled=false}, nothing else is read or checked.
     */
    public static AgentOptions parse(String args, Map<String, String> env) throws OptionsException {
        OptionSources values = OptionSources.gather(args, env, KEYS);
        if (!bool(values, "enabled", true)) {
            return new AgentOptions(values.keeping("enabled"), null);
        }
        return new AgentOptions(values, token(values.get("token.file"), env));
    }

    /** One line for the log: every option but the token, and where they came from. */
    public String describe() {
        return "url=" + url + ", token=" + (token == null ? "none" : "set") + ", max.keys=" + maxKeys
                + ", fallback.after.ms=" + fallbackAfterMs + ", lease.ms=" + leaseMs
                + (tls == null ? "" : ", " + tls.describe()) + "; from " + sources;
    }

    /** Where enabled=false came from (for the log line that says the agent stays out). */
    public String disabledBy() {
        return "enabled=false in " + enabledOrigin;
    }

    private static SidecarTls tls(OptionSources values, URL url) throws OptionsException {
        String ca = values.get("tls.ca.file");
        String cert = values.get("tls.cert.file");
        String key = values.get("tls.key.file");
        if (ca == null && cert == null && key == null) {
            return null;
        }
        if (!url.getProtocol().equals("https")) {
            throw new OptionsException("tls.* options need an https:// url (url=" + url + ")");
        }
        try {
            return SidecarTls.read(ca, cert, key);
        } catch (IOException e) {
            throw new OptionsException(e.getMessage());
        }
    }

    private static String token(String file, Map<String, String> env) throws OptionsException {
        if (file != null) {
            if (file.isEmpty()) {
                throw new OptionsException("token.file is empty");
            }
            String token;
            try {
                token = new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.UTF_8).trim();
            } catch (IOException | RuntimeException e) {
                throw new OptionsException("token.file '" + file + "' cannot be read (" + e + ")");
            }
            if (token.isEmpty()) {
                throw new OptionsException("token.file '" + file + "' holds no token");
            }
            return token;
        }
        String token = env.get(TOKEN_ENV);
        return token == null || token.trim().isEmpty() ? null : token.trim();
    }

    private static URL parseUrl(String text) throws OptionsException {
        try {
            URL url = new URL(text);
            if (!url.getProtocol().equals("http") && !url.getProtocol().equals("https")) {
                throw new OptionsException("url '" + text + "' is not http:// or https://");
            }
            if (url.getHost().isEmpty()) {
                throw new OptionsException("url '" + text + "' has no host");
            }
            return url;
        } catch (MalformedURLException e) {
            throw new OptionsException("url '" + text + "' is not a URL (" + e.getMessage() + ")");
        }
    }

    private static boolean bool(OptionSources values, String key, boolean fallback) throws OptionsException {
        String text = values.get(key);
        if (text == null) {
            return fallback;
        }
        if (text.equalsIgnoreCase("true") || text.equalsIgnoreCase("false")) {
            return Boolean.parseBoolean(text);
        }
        throw new OptionsException(key + "='" + text + "' is not true or false" + from(values, key));
    }

    private static long number(OptionSources values, String key, long fallback, long min, long max)
            throws OptionsException {
        String text = values.get(key);
        if (text == null) {
            return fallback;
        }
        long value;
        try {
            value = Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new OptionsException(key + "='" + text + "' is not a whole number" + from(values, key));
        }
        if (value < min || value > max) {
            throw new OptionsException(key + "=" + value + " is out of range [" + min + ", " + max + "]"
                    + from(values, key));
        }
        return value;
    }

    /** Where a bad value came from, when not from the -javaagent string (the source an operator looks at first). */
    private static String from(OptionSources values, String key) {
        String origin = values.origin(key);
        return origin == null || origin.equals(OptionSources.STRING) ? "" : " (" + origin + ")";
    }

    /** A bad option: its message names the option and what is wrong. */
    public static final class OptionsException extends Exception {
        private static final long serialVersionUID = 1L;

        public OptionsException(String message) {
            super(message);
        }
    }
}
