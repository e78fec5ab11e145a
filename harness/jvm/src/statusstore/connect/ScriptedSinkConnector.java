package statusstore.connect;

import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/** A sink connector that runs, fails, fails on start or blocks as its configuration says ({@link Script}). */
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
        Blocking.maybeBlock(lifecycle.config(), "task-configs");
        return Tasks.configs(lifecycle.config(), maxTasks);
    }

    @Override
    public void stop() {
        lifecycle.stop();
    }

    @Override
    public Config validate(Map<String, String> connectorConfigs) {
        Blocking.maybeBlock(connectorConfigs, "validate");
        return super.validate(connectorConfigs);
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
