package statusstore.connect;

import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/** A source task that runs (writing a record a second to {@code scripted.topic}, if set), or fails. */
public class ScriptedSourceTask extends SourceTask {
    private Script script;
    private String topic;
    private int number;
    private long sent;

    @Override
    public void start(Map<String, String> props) {
        number = Tasks.number(props);
        script = Script.forTask(props, number);
        topic = props.get("scripted.topic");
        script.start();
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        if (script.failsNow()) {
            throw script.failure();
        }
        Thread.sleep(topic == null ? 200 : 1000);
        if (topic == null) {
            return null;
        }
        sent++;
        return List.of(new SourceRecord(Map.of("task", number), Map.of("sent", sent), topic, null,
                Schema.STRING_SCHEMA, "task-" + number, Schema.INT64_SCHEMA, sent));
    }

    @Override
    public void stop() {
    }

    @Override
    public String version() {
        return Script.VERSION;
    }
}
