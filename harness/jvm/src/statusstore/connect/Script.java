package statusstore.connect;

import java.util.Map;

/**
 * What a scripted connector or task does, read from the connector's configuration.
 *
 * <pre>
 *   scripted.connector            run | fail | fail-on-start          (default run)
 *   scripted.connector.message    the failure's message               (default "scripted failure")
 *   scripted.task                 run | fail | fail-on-start, for every task without its own line
 *   scripted.task.N               the same, for task N
 *   scripted.task.message         the failure's message, for every task without its own line
 *   scripted.task.N.message       the same, for task N
 *   scripted.tasks                how many tasks the connector asks for (default tasks.max)
 *   scripted.start.delay.ms       how long start() takes, connector and tasks (default 0): a restart
 *                                 stays RESTARTING that long
 *   scripted.topic                a source task writes one record a second here (KIP-558 topic tracking)
 * </pre>
 *
 * {@code fail} fails after a successful start: the connector through {@code ConnectorContext.raiseError},
 * a source task from {@code poll()}, a sink task from {@code put()}. {@code fail-on-start} throws from
 * {@code start()}. Every message reaches the status's trace as written, characters above U+FFFF included.
 */
final class Script {
    static final String VERSION = "1.0.0-scripted";

    enum Mode { RUN, FAIL, FAIL_ON_START }

    final Mode mode;
    final String message;
    final long startDelayMs;

    private Script(Mode mode, String message, long startDelayMs) {
        this.mode = mode;
        this.message = message;
        this.startDelayMs = startDelayMs;
    }

    static Script forConnector(Map<String, String> config) {
        return new Script(mode(config.get("scripted.connector")),
                config.getOrDefault("scripted.connector.message", "scripted failure"), delay(config));
    }

    static Script forTask(Map<String, String> config, int task) {
        String mode = config.getOrDefault("scripted.task." + task, config.get("scripted.task"));
        String message = config.getOrDefault("scripted.task." + task + ".message",
                config.getOrDefault("scripted.task.message", "scripted failure"));
        return new Script(mode(mode), message, delay(config));
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
        if (mode == Mode.FAIL_ON_START) {
            throw new org.apache.kafka.connect.errors.ConnectException(message);
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
        throw new org.apache.kafka.common.config.ConfigException("unknown scripted mode: " + name);
    }

    private static long delay(Map<String, String> config) {
        return Long.parseLong(config.getOrDefault("scripted.start.delay.ms", "0"));
    }
}
