package statusstore.connect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** The task configurations of a scripted connector: the connector's own, and the task's number. */
final class Tasks {
    static final String NUMBER = "scripted.task.number";

    private Tasks() {
    }

    static List<Map<String, String>> configs(Map<String, String> config, int maxTasks) {
        int count = Integer.parseInt(config.getOrDefault("scripted.tasks", Integer.toString(maxTasks)));
        List<Map<String, String>> configs = new ArrayList<>();
        for (int task = 0; task < count; task++) {
            Map<String, String> taskConfig = new HashMap<>(config);
            taskConfig.put(NUMBER, Integer.toString(task));
            configs.add(taskConfig);
        }
        return configs;
    }

    static int number(Map<String, String> taskConfig) {
        return Integer.parseInt(taskConfig.get(NUMBER));
    }
}
