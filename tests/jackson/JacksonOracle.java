import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Kafka Connect's status values, written and read with real Jackson exactly as a Connect worker does:
 * Connect's JsonConverter with schemas disabled (its JsonSerializer and JsonDeserializer, the ObjectMapper
 * features they set, a Struct or Map turned into an ObjectNode in field order, a JsonNode turned back into
 * Java maps without a schema) and KafkaStatusBackingStore's parsing of the resulting map.
 *
 * <p>It serves a test over stdin/stdout, one JVM for many examples. A request batch is a count followed by
 * that many requests; every answer is written after the whole batch was read, then flushed. Strings travel as
 * UTF-16 code units (an int count, then big-endian chars), so they may hold lone surrogates as Java strings can.
 *
 * <pre>
 * request                                               answer
 * 'E' state, trace?, worker, generation(int)             0 bytes | 1 message        (a status value)
 * 'T' name, connector, task(int), timestamp(long)        0 bytes | 1 message        (a topic status value)
 * 'J' text                                               0 bytes | 1 message        ({text: text}, as REST maps)
 * 'S' bytes                                              0 state trace? worker? generation(int) | 1 message
 * 'P' bytes                                              0 name connector task(int) timestamp(long) | 1 message
 * 'C' bytes                                              0 bytes | 1 message        (a connector configuration)
 * 'V'                                                    0 Jackson's version
 * </pre>
 * ("x?" is a presence byte, then x when it is 1; "bytes" is an int length, then the bytes.)
 */
public final class JacksonOracle {

    /** Connect's status states (AbstractStatus.State): valueOf accepts exactly these names. */
    enum State { UNASSIGNED, RUNNING, PAUSED, FAILED, DESTROYED, RESTARTING, STOPPED }

    // JsonConverter's node factory: exact BigDecimals.
    private static final JsonNodeFactory NODES = new JsonNodeFactory(true);
    // JsonSerializer: a plain ObjectMapper with the converter's node factory.
    private static final ObjectMapper WRITER = new ObjectMapper().setNodeFactory(NODES);
    // JsonDeserializer: leading zeros allowed; JsonConverter adds USE_BIG_DECIMAL_FOR_FLOATS.
    private static final ObjectMapper READER = new ObjectMapper()
            .enable(JsonReadFeature.ALLOW_LEADING_ZEROS_FOR_NUMBERS.mappedFeature())
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .setNodeFactory(NODES);

    private JacksonOracle() {
    }

    public static void main(String[] args) throws IOException {
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(System.out, 1 << 16));
        while (true) {
            int count;
            try {
                count = in.readInt();
            } catch (EOFException end) {
                return;
            }
            ByteArrayOutputStream answers = new ByteArrayOutputStream();
            DataOutputStream answer = new DataOutputStream(answers);
            for (int i = 0; i < count; i++) {
                serve(in, answer);
            }
            answer.flush();
            answers.writeTo(out);
            out.flush();
        }
    }

    private static void serve(DataInputStream in, DataOutputStream answer) throws IOException {
        byte op = in.readByte();
        switch (op) {
            case 'E': {
                String state = readString(in);
                String trace = in.readByte() == 1 ? readString(in) : null;
                String workerId = readString(in);
                int generation = in.readInt();
                answerBytes(answer, () -> statusValue(state, trace, workerId, generation));
                break;
            }
            case 'T': {
                String name = readString(in);
                String connector = readString(in);
                int task = in.readInt();
                long timestamp = in.readLong();
                answerBytes(answer, () -> topicValue(name, connector, task, timestamp));
                break;
            }
            case 'J': {
                String text = readString(in);
                // The text as a property name and as a string value: Connect's REST bodies hold both.
                answerBytes(answer, () -> WRITER.writeValueAsBytes(NODES.objectNode().put(text, text)));
                break;
            }
            case 'S':
                readStatus(readBytes(in), answer);
                break;
            case 'P':
                readTopicStatus(readBytes(in), answer);
                break;
            case 'C':
                readConnectorConfig(readBytes(in), answer);
                break;
            case 'V':
                answer.writeByte(0);
                writeString(answer, com.fasterxml.jackson.core.json.PackageVersion.VERSION.toString());
                break;
            default:
                throw new IOException("unknown request " + op);
        }
    }

    // ------------------------------------------------------------------ writing, as JsonConverter.fromConnectData

    /** A status Struct (state, trace, worker_id, generation) as an ObjectNode in schema order, serialized. */
    private static byte[] statusValue(String state, String trace, String workerId, int generation) throws IOException {
        ObjectNode value = NODES.objectNode();
        value.set("state", NODES.textNode(state));
        value.set("trace", trace == null ? NODES.nullNode() : NODES.textNode(trace));
        value.set("worker_id", NODES.textNode(workerId));
        value.set("generation", NODES.numberNode(generation));
        return WRITER.writeValueAsBytes(value);
    }

    /** The map {"topic": Struct(name, connector, task, discoverTimestamp)} as an ObjectNode, serialized. */
    private static byte[] topicValue(String name, String connector, int task, long timestamp) throws IOException {
        ObjectNode inner = NODES.objectNode();
        inner.set("name", NODES.textNode(name));
        inner.set("connector", NODES.textNode(connector));
        inner.set("task", NODES.numberNode(task));
        inner.set("discoverTimestamp", NODES.numberNode(timestamp));
        ObjectNode value = NODES.objectNode();
        value.set("topic", inner);
        return WRITER.writeValueAsBytes(value);
    }

    // ------------------------------------------------------------------ reading, as KafkaStatusBackingStore

    /** A schemaless JsonConverter.toConnectData: the JsonNode as Java maps, lists, Long, Double, String... */
    private static Object toConnectData(byte[] value) throws IOException {
        return toConnect(READER.readTree(value));
    }

    private static Object toConnect(JsonNode node) {
        switch (node.getNodeType()) {
            case NULL:
            case MISSING:
                return null;
            case BOOLEAN:
                return node.booleanValue();
            case NUMBER:
                return node.isIntegralNumber() ? (Object) node.longValue() : (Object) node.doubleValue();
            case STRING:
                return node.textValue();
            case ARRAY: {
                List<Object> list = new ArrayList<>();
                for (JsonNode element : node) {
                    list.add(toConnect(element));
                }
                return list;
            }
            case OBJECT: {
                // Connect's converter makes a HashMap; insertion order here, so that a map written back keeps it.
                Map<String, Object> map = new LinkedHashMap<>();
                for (Map.Entry<String, JsonNode> field : node.properties()) {
                    map.put(field.getKey(), toConnect(field.getValue()));
                }
                return map;
            }
            default:
                throw new IllegalStateException("no Connect type for " + node.getNodeType());
        }
    }

    /** parseConnectorStatus / parseTaskStatus: any exception means the record is skipped. */
    @SuppressWarnings("unchecked")
    private static void readStatus(byte[] value, DataOutputStream answer) throws IOException {
        State state;
        String trace;
        String workerId;
        int generation;
        try {
            Object data = toConnectData(value);
            if (!(data instanceof Map)) {
                throw new IllegalArgumentException("not a map: " + data);
            }
            Map<String, Object> status = (Map<String, Object>) data;
            state = State.valueOf((String) status.get("state"));
            trace = (String) status.get("trace");
            workerId = (String) status.get("worker_id");
            generation = ((Long) status.get("generation")).intValue();
        } catch (Exception e) {
            answerRejected(answer, e);
            return;
        }
        answer.writeByte(0);
        writeString(answer, state.name());
        writeNullableString(answer, trace);
        writeNullableString(answer, workerId);
        answer.writeInt(generation);
    }

    /** parseTopicStatus, with TopicStatus's own checks (name and connector not null). */
    @SuppressWarnings("unchecked")
    private static void readTopicStatus(byte[] value, DataOutputStream answer) throws IOException {
        String name;
        String connector;
        int task;
        long timestamp;
        try {
            Object data = toConnectData(value);
            if (!(data instanceof Map)) {
                throw new IllegalArgumentException("not a map: " + data);
            }
            Object inner = ((Map<String, Object>) data).get("topic");
            if (!(inner instanceof Map)) {
                throw new IllegalArgumentException("no topic map: " + inner);
            }
            Map<String, Object> topic = (Map<String, Object>) inner;
            name = (String) topic.get("name");
            connector = (String) topic.get("connector");
            task = ((Long) topic.get("task")).intValue();
            timestamp = (long) topic.get("discoverTimestamp");
            if (name == null || connector == null) {
                throw new NullPointerException("TopicStatus requires a topic and a connector");
            }
        } catch (Exception e) {
            answerRejected(answer, e);
            return;
        }
        answer.writeByte(0);
        writeString(answer, name);
        writeString(answer, connector);
        answer.writeInt(task);
        answer.writeLong(timestamp);
    }

    /**
     * processConnectorConfigRecord: a null value (a tombstone, or no content, or JSON null) answers "null"; a value
     * that is not a map, or whose "properties" is not a map, is ignored; otherwise the properties map as Connect
     * holds it (Long, Double, Boolean, String, maps, lists), written back by Jackson as a REST answer would be if
     * Connect's REST could write a configuration holding more than strings (it answers 500 for one).
     */
    @SuppressWarnings("unchecked")
    private static void readConnectorConfig(byte[] value, DataOutputStream answer) throws IOException {
        answerBytes(answer, () -> {
            Object data = toConnectData(value);
            if (data == null) {
                return "null".getBytes(java.nio.charset.StandardCharsets.UTF_8);
            }
            if (!(data instanceof Map)) {
                throw new IllegalArgumentException("not a map: " + data.getClass().getSimpleName());
            }
            Object properties = ((Map<String, Object>) data).get("properties");
            if (!(properties instanceof Map)) {
                throw new IllegalArgumentException("properties is not a map");
            }
            return WRITER.writeValueAsBytes(properties);
        });
    }

    // ------------------------------------------------------------------ the wire between the test and this JVM

    private interface Producer {
        byte[] get() throws Exception;
    }

    private static void answerBytes(DataOutputStream answer, Producer producer) throws IOException {
        byte[] bytes;
        try {
            bytes = producer.get();
        } catch (Exception e) {
            answerRejected(answer, e);
            return;
        }
        answer.writeByte(0);
        answer.writeInt(bytes.length);
        answer.write(bytes);
    }

    private static void answerRejected(DataOutputStream answer, Exception e) throws IOException {
        answer.writeByte(1);
        writeString(answer, e.getClass().getSimpleName() + ": " + e.getMessage());
    }

    private static byte[] readBytes(DataInputStream in) throws IOException {
        byte[] bytes = new byte[in.readInt()];
        in.readFully(bytes);
        return bytes;
    }

    private static String readString(DataInputStream in) throws IOException {
        char[] chars = new char[in.readInt()];
        for (int i = 0; i < chars.length; i++) {
            chars[i] = in.readChar();
        }
        return new String(chars);
    }

    private static void writeString(DataOutputStream out, String text) throws IOException {
        out.writeInt(text.length());
        out.writeChars(text);
    }

    private static void writeNullableString(DataOutputStream out, String text) throws IOException {
        out.writeByte(text == null ? 0 : 1);
        if (text != null) {
            writeString(out, text);
        }
    }
}
