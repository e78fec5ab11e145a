package statusstore.connect;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What a scripted connector or task does, read from the connector's configuration.
 *
 * <pre>
 *   scripted.connector            run | fail | fail-on-start | fail-once  (default run)
 *   scripted.connector.message    the failure's message               (default "scripted failure")
 *   scripted.task                 the same, for every task without its own line
 *   scripted.task.N               the same, for task N
 *   scripted.task.message         the failure's message, for every task without its own line
 *   scripted.task.N.message       the same, for task N
 *   scripted.tasks                how many tasks the connector asks for (default tasks.max)
 *   scripted.start.delay.ms       how long start() takes, connector and tasks (default 0): a restart
 *                                 stays RESTARTING that long
 *   scripted.topic                a source task writes one record a second here (KIP-558 topic tracking)
 *   scripted.fail.at.ms           fail-once: the epoch time (ms) at which the first run fails, from poll() or
 *                                 put() (default: none, the first start() throws)
 *   scripted.error                connect | config: the failure is a ConnectException (default) or Kafka's
 *                                 ConfigException (a configuration error)
 *   scripted.block                task-configs | validate: the connector's taskConfigs() (on the worker's herder
 *                                 thread) or validate() blocks, the first time it is called in this worker
 *   scripted.block.ms             how long it blocks (default 60000): a bound, never for ever
 *   scripted.downstream           host:port of the system a sink task writes to: its start() and every put()
 *                                 open a TCP connection there (1 s at most) and fail with a ConnectException,
 *                                 caused by the JDK's, when none is accepted (a downstream that is away)
 * </pre>
 *
 * {@code fail} fails after a successful start: the connector through {@code ConnectorContext.raiseError},
 * a source task from {@code poll()}, a sink task from {@code put()}. {@code fail-on-start} throws from
 * {@code start()}. {@code fail-once} fails once in this worker (a static set per JVM), in the first run that reaches
 * its time (its start, or {@code scripted.fail.at.ms}), and runs once restarted, so that a restart through Connect's
 * REST API recovers it. A run stopped before its time (a rebalance moved or restarted it) does not use the failure
 * up: counting starts instead left a task started twice before its time RUNNING for good. Every message reaches the status's trace as written, characters above
 * U+FFFF included.
 */
final class Script {
    static final String VERSION = "1.0.0-scripted";

    enum Mode { RUN, FAIL, FAIL_ON_START, FAIL_ONCE }

    // The connectors and tasks ("<connector>/<task>") that have failed in this worker, for fail-once.
    private static final Set<String> FAILED = ConcurrentHashMap.newKeySet();

    final Mode mode;
    final String message;
    final long startDelayMs;
    final boolean configError;
    final long failAtMs;
    // fail-once: the key of what runs, in FAILED once it has failed.
    private final String runKey;

    private Script(Mode mode, String message, long startDelayMs, Map<String, String> config, String runKey) {
        this.mode = mode;
        this.message = message;
        this.startDelayMs = startDelayMs;
        this.configError = "config".equals(config.get("scripted.error"));
        this.failAtMs = Long.parseLong(config.getOrDefault("scripted.fail.at.ms", "-1"));
        this.runKey = runKey;
    }

    static Script forConnector(Map<String, String> config) {
        return new Script(mode(config.get("scripted.connector")),
                config.getOrDefault("scripted.connector.message", "scripted failure"), delay(config), config,
                config.get("name") + "/connector");
    }

    static Script forTask(Map<String, String> config, int task) {
        String mode = config.getOrDefault("scripted.task." + task, config.get("scripted.task"));
        String message = config.getOrDefault("scripted.task." + task + ".message",
                config.getOrDefault("scripted.task.message", "scripted failure"));
        return new Script(mode(mode), message, delay(config), config, config.get("name") + "/" + task);
    }

    /** The failure this script raises. */
    RuntimeException failure() {
        return configError ? new org.apache.kafka.common.config.ConfigException(message)
                : new org.apache.kafka.connect.errors.ConnectException(message);
    }

    /** Whether the task fails now, after its start: {@code fail}, or {@code fail-once} at its time, once. */
    boolean failsNow() {
        return mode == Mode.FAIL
                || (mode == Mode.FAIL_ONCE && failAtMs >= 0 && System.currentTimeMillis() >= failAtMs
                    && FAILED.add(runKey));
    }

    /** Sleeps for the start delay, then throws when the script says to fail on start. */
    void start() {
        if (startDelayMs > 0) {
            try {
                Thread.sleep(startDelayMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (mode == Mode.FAIL_ON_START || (mode == Mode.FAIL_ONCE && failAtMs < 0 && FAILED.add(runKey))) {
            throw failure();
        }
    }

    private static Mode mode(String name) {
        if (name == null || name.equals("run")) {
            return Mode.RUN;
        }
        if (name.equals("fail")) {
            return Mode.FAIL;
        }
        if (name.equals("fail-on-start")) {
            return Mode.FAIL_ON_START;
        }
        if (name.equals("fail-once")) {
            return Mode.FAIL_ONCE;
        }
        throw new org.apache.kafka.common.config.ConfigException("unknown scripted mode: " + name);
    }

    private static long delay(Map<String, String> config) {
        return Long.parseLong(config.getOrDefault("scripted.start.delay.ms", "0"));
    }
}
