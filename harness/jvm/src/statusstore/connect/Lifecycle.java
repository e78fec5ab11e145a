package statusstore.connect;

import java.util.Map;
import org.apache.kafka.connect.connector.ConnectorContext;
import org.apache.kafka.connect.errors.ConnectException;

/** A scripted connector's start and stop, the same for sources and sinks. */
final class Lifecycle {
    private Map<String, String> config;
    private Thread failer;

    Map<String, String> config() {
        return config;
    }

    void start(Map<String, String> config, ConnectorContext context) {
        this.config = config;
        Script script = Script.forConnector(config);
        script.start();
        if (script.mode == Script.Mode.FAIL) {
            // After start() has returned, as a connector's own monitoring thread would.
            failer = new Thread(() -> {
                try {
                    Thread.sleep(200);
                    context.raiseError(new ConnectException(script.message));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "scripted-connector-failer");
            failer.setDaemon(true);
            failer.start();
        }
    }

    void stop() {
        if (failer != null) {
            failer.interrupt();
        }
    }
}
