package io.statusstore.agent.connect;

import net.bytebuddy.description.field.FieldDescription;
import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.description.type.TypeDefinition;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.matcher.ElementMatcher;
import net.bytebuddy.pool.TypePool;

import java.util.ArrayList;
import java.util.List;

import static net.bytebuddy.matcher.ElementMatchers.isPackagePrivate;
import static net.bytebuddy.matcher.ElementMatchers.isPublic;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.returns;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

/**
 * The parts of Connect the agent touches, by name and signature, the same in Connect 3.9 and 4.x (checked with
 * javap on both): the matchers the interception uses are the ones {@link #missing} verifies, so a Connect
 * whose classes differ is left untouched rather than half instrumented.
 */
public final class StoreShape {
    public static final String STORE = "org.apache.kafka.connect.storage.KafkaStatusBackingStore";
    public static final String KAFKA_BASED_LOG = "org.apache.kafka.connect.util.KafkaBasedLog";
    private static final String RUNTIME = "org.apache.kafka.connect.runtime.";
    private static final String CONNECTOR_STATUS = RUNTIME + "ConnectorStatus";
    private static final String TASK_STATUS = RUNTIME + "TaskStatus";
    private static final String TOPIC_STATUS = RUNTIME + "TopicStatus";
    private static final String WORKER_CONFIG = RUNTIME + "WorkerConfig";
    private static final String STRING = "java.lang.String";
    private static final String CALLBACK = "org.apache.kafka.clients.producer.Callback";

    /** put/putSafe of ConnectorStatus and TaskStatus, put of TopicStatus. */
    public static final ElementMatcher.Junction<MethodDescription> WRITES =
            method("put", "void", CONNECTOR_STATUS).or(method("putSafe", "void", CONNECTOR_STATUS))
                    .or(method("put", "void", TASK_STATUS)).or(method("putSafe", "void", TASK_STATUS))
                    .or(method("put", "void", TOPIC_STATUS));
    public static final ElementMatcher.Junction<MethodDescription> DELETE_TOPIC =
            method("deleteTopic", "void", STRING, STRING);
    public static final ElementMatcher.Junction<MethodDescription> CONFIGURE =
            method("configure", "void", WORKER_CONFIG);
    public static final ElementMatcher.Junction<MethodDescription> START = method("start", "void");
    public static final ElementMatcher.Junction<MethodDescription> STOP = method("stop", "void");
    public static final ElementMatcher.Junction<MethodDescription> FLUSH = method("flush", "void");
    /** read(ConsumerRecord), package-private: every record the store reads of its topic. */
    public static final ElementMatcher.Junction<MethodDescription> READ = named("read").and(isPackagePrivate())
            .and(returns(named("void"))).and(takesArguments(1))
            .and(takesArgument(0, named("org.apache.kafka.clients.consumer.ConsumerRecord")));
    /** KafkaBasedLog.send(K, V, Callback), erased: every record the status store hands its producer. */
    public static final ElementMatcher.Junction<MethodDescription> LOG_SEND =
            method("send", "void", "java.lang.Object", "java.lang.Object", CALLBACK);

    private StoreShape() {
    }

    /**
     * What the agent needs and the given store class (with the classes {@code pool} finds beside it) lacks:
     * empty when the agent may instrument it.
     */
    public static List<String> missing(TypeDescription store, TypePool pool) {
        List<String> missing = new ArrayList<>();
        declares(store, WRITES.and(named("put")).and(takesArgument(0, named(CONNECTOR_STATUS))), "put(ConnectorStatus)", missing);
        declares(store, WRITES.and(named("putSafe")).and(takesArgument(0, named(CONNECTOR_STATUS))), "putSafe(ConnectorStatus)", missing);
        declares(store, WRITES.and(named("put")).and(takesArgument(0, named(TASK_STATUS))), "put(TaskStatus)", missing);
        declares(store, WRITES.and(named("putSafe")).and(takesArgument(0, named(TASK_STATUS))), "putSafe(TaskStatus)", missing);
        declares(store, WRITES.and(takesArgument(0, named(TOPIC_STATUS))), "put(TopicStatus)", missing);
        declares(store, DELETE_TOPIC, "deleteTopic(String, String)", missing);
        declares(store, CONFIGURE, "configure(WorkerConfig)", missing);
        declares(store, START, "start()", missing);
        declares(store, STOP, "stop()", missing);
        declares(store, FLUSH, "flush()", missing);
        declares(store, READ, "read(ConsumerRecord)", missing);
        field(store, "kafkaLog", KAFKA_BASED_LOG, missing);
        field(store, "sendRetryExecutor", "java.util.concurrent.ExecutorService", missing);
        TypeDescription log = describe(pool, KAFKA_BASED_LOG, missing);
        if (log != null) {
            declares(log, LOG_SEND, "KafkaBasedLog.send(Object, Object, Callback)", missing);
            declares(log, named("partitionCount").and(isPublic()).and(takesArguments(0)),
                    "KafkaBasedLog.partitionCount()", missing);
        }
        TypeDescription status = describe(pool, RUNTIME + "AbstractStatus", missing);
        if (status != null) {
            for (String accessor : new String[] {"id", "state", "trace", "workerId", "generation"}) {
                inherits(status, accessor, "AbstractStatus." + accessor + "()", missing);
            }
        }
        TypeDescription topic = describe(pool, TOPIC_STATUS, missing);
        if (topic != null) {
            for (String accessor : new String[] {"topic", "connector", "task", "discoverTimestamp"}) {
                inherits(topic, accessor, "TopicStatus." + accessor + "()", missing);
            }
        }
        TypeDescription taskId = describe(pool, "org.apache.kafka.connect.util.ConnectorTaskId", missing);
        if (taskId != null) {
            inherits(taskId, "connector", "ConnectorTaskId.connector()", missing);
            inherits(taskId, "task", "ConnectorTaskId.task()", missing);
        }
        TypeDescription config = describe(pool, WORKER_CONFIG, missing);
        if (config != null) {
            inherits(config, "kafkaClusterId", "WorkerConfig.kafkaClusterId()", missing);
        }
        return missing;
    }

    private static ElementMatcher.Junction<MethodDescription> method(String name, String returnType, String... params) {
        ElementMatcher.Junction<MethodDescription> m = named(name).and(isPublic())
                .and(returns(named(returnType))).and(takesArguments(params.length));
        for (int i = 0; i < params.length; i++) {
            m = m.and(takesArgument(i, named(params[i])));
        }
        return m;
    }

    private static void declares(TypeDescription type, ElementMatcher<? super MethodDescription> matcher, String what,
                                 List<String> missing) {
        if (type.getDeclaredMethods().filter(matcher).size() != 1) {
            missing.add(what);
        }
    }

    private static void inherits(TypeDescription type, String name, String what, List<String> missing) {
        for (TypeDefinition t = type; t != null; t = t.getSuperClass()) {
            if (!t.getDeclaredMethods().filter(named(name).and(isPublic()).and(takesArguments(0))).isEmpty()) {
                return;
            }
        }
        missing.add(what);
    }

    private static void field(TypeDescription type, String name, String fieldType, List<String> missing) {
        FieldDescription.InDefinedShape found = null;
        for (FieldDescription.InDefinedShape f : type.getDeclaredFields().filter(named(name))) {
            found = f;
        }
        if (found == null || !found.getType().asErasure().getName().equals(fieldType)) {
            missing.add("field " + name + " (" + fieldType + ")");
        }
    }

    private static TypeDescription describe(TypePool pool, String name, List<String> missing) {
        TypePool.Resolution resolution = pool.describe(name);
        if (!resolution.isResolved()) {
            missing.add("class " + name);
            return null;
        }
        return resolution.resolve();
    }
}
