package statusstore.connect;

import java.util.Collection;
import java.util.Map;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/** A sink task that runs (dropping what it is given, after reaching its downstream system when it has one), or fails. */
public class ScriptedSinkTask extends SinkTask {
    private Script script;
    private Downstream downstream;

    @Override
    public void start(Map<String, String> props) {
        int number = Tasks.number(props);
        script = Script.forTask(props, number);
        script.start();
        downstream = Downstream.of(props);
        if (downstream != null) {
            downstream.reach();
        }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        // The worker calls put() after every poll of its consumer, with or without records.
        if (script.failsNow()) {
            throw script.failure();
        }
        if (downstream != null) {
            downstream.reach();
        }
    }

    @Override
    public void stop() {
    }

    @Override
    public String version() {
        return Script.VERSION;
    }
}
