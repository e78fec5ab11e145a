package io.statusstore.agent.connect;

import io.statusstore.agent.status.StatusUpdate;
import org.apache.kafka.connect.runtime.AbstractStatus;
import org.apache.kafka.connect.runtime.ConnectorStatus;
import org.apache.kafka.connect.runtime.TaskStatus;
import org.apache.kafka.connect.runtime.TopicStatus;

import java.lang.reflect.Method;

/**
 * Reads the worker's status objects into {@link StatusUpdate}s. Every accessor used is the same in Connect 3.9
 * and 4.x except KIP-891's {@code AbstractStatus.version()} (4.1+), looked up once, reflectively. ConnectorTaskId
 * is read reflectively too: it is a record in 4.x, which a Java 8 compilation cannot name.
 */
final class StatusReader {
    private static final String TASK_ID = "org.apache.kafka.connect.util.ConnectorTaskId";
    private static final Method TASK_ID_CONNECTOR = taskIdAccessor("connector");
    private static final Method TASK_ID_TASK = taskIdAccessor("task");
    /** {@code AbstractStatus.version()}, or null on a Connect without it (3.x). */
    private static final Method VERSION = versionMethod();

    private StatusReader() {
    }

    static boolean hasVersion() {
        return VERSION != null;
    }

    /** The write {@code put}/{@code putSafe} ({@code safe}) of a ConnectorStatus, TaskStatus or TopicStatus. */
    static StatusUpdate read(Object status, boolean safe) throws ReflectiveOperationException {
        if (status instanceof TaskStatus) {
            TaskStatus task = (TaskStatus) status;
            Object id = ((AbstractStatus<?>) task).id();
            return StatusUpdate.task((String) TASK_ID_CONNECTOR.invoke(id), (Integer) TASK_ID_TASK.invoke(id),
                    task.state().name(), task.trace(), task.workerId(),
                    task.generation(), hasVersion(), version(task), safe, status);
        }
        if (status instanceof ConnectorStatus) {
            ConnectorStatus connector = (ConnectorStatus) status;
            return StatusUpdate.connector(connector.id(), connector.state().name(), connector.trace(),
                    connector.workerId(), connector.generation(), hasVersion(), version(connector), safe, status);
        }
        if (status instanceof TopicStatus) {
            TopicStatus topic = (TopicStatus) status;
            return StatusUpdate.topic(topic.connector(), topic.topic(), topic.task(), topic.discoverTimestamp(), status);
        }
        throw new IllegalArgumentException("not a Connect status: " + (status == null ? null : status.getClass()));
    }

    private static String version(AbstractStatus<?> status) throws ReflectiveOperationException {
        return VERSION == null ? null : (String) VERSION.invoke(status);
    }

    private static Method taskIdAccessor(String name) {
        try {
            return Class.forName(TASK_ID, false, AbstractStatus.class.getClassLoader()).getMethod(name);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(TASK_ID + "." + name + "() not found", e);
        }
    }

    private static Method versionMethod() {
        try {
            return AbstractStatus.class.getMethod("version");
        } catch (NoSuchMethodException e) {
            return null;
        }
    }
}
