package statusstore.connect;

import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/** A sink connector that runs, fails or fails on start as its configuration says ({@link Script}). */
public class ScriptedSinkConnector extends SinkConnector {
    private final Lifecycle lifecycle = new Lifecycle();

    @Override
    public void start(Map<String, String> props) {
        lifecycle.start(props, context());
    }

    @Override
    public Class<? extends Task> taskClass() {
        return ScriptedSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return Tasks.configs(lifecycle.config(), maxTasks);
    }

    @Override
    public void stop() {
        lifecycle.stop();
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef();
    }

    @Override
    public String version() {
        return Script.VERSION;
    }
}
