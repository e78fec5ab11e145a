package io.statusstore.agent.json;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A JSON document read as a tree through the worker's own Jackson (jackson-core's streaming parser, from the worker's
 * class path: see {@link Jackson}): objects become {@code Map<String, Object>} (in order), arrays
 * {@code List<Object>}, whole numbers {@code Long} (or {@code Double} with a fraction or an exponent), and
 * {@code true}/{@code false}/{@code null} their Java values.
 *
 * <p>A peer's document is checked as it is read, token by token: nested deeper than {@link #MAX_DEPTH}, a whole
 * number beyond a long, or anything after the one value is refused like any malformed document, before the rest is
 * read. The depth bound is the agent's own, so it holds on every Jackson 2.x (StreamReadConstraints came with 2.15
 * and allows 1000 levels); the size is bounded by whoever hands the bytes over.
 */
public final class JsonTree {
    /** The deepest nesting of objects and arrays read; the sidecar's answers nest three levels. */
    public static final int MAX_DEPTH = 32;
    private static final JsonFactory FACTORY = new JsonFactory();

    private JsonTree() {
    }

    /** Parses one JSON document; throws {@link IllegalArgumentException} saying what is wrong, and where. */
    public static Object parse(String text) {
        return parse(text.getBytes(StandardCharsets.UTF_8));
    }

    /** Parses one JSON document of UTF-8 bytes; throws {@link IllegalArgumentException} as {@link #parse(String)}. */
    public static Object parse(byte[] utf8) {
        try (JsonParser parser = FACTORY.createParser(utf8)) {
            JsonToken first = parser.nextToken();
            if (first == null) {
                throw new IllegalArgumentException("JSON: no value");
            }
            Object value = value(parser, first, 0);
            if (parser.nextToken() != null) {
                throw error(parser, "more after the value");
            }
            return value;
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (IOException | RuntimeException e) {
            // Whatever Jackson throws on a peer's bytes (its own limits included) is a document refused.
            throw new IllegalArgumentException("JSON: " + e.getMessage(), e);
        }
    }

    private static Object value(JsonParser parser, JsonToken token, int depth) throws IOException {
        switch (token) {
            case START_OBJECT: return object(parser, depth + 1);
            case START_ARRAY: return array(parser, depth + 1);
            case VALUE_STRING: return parser.getText();
            case VALUE_NUMBER_INT: return whole(parser);
            case VALUE_NUMBER_FLOAT: return parser.getDoubleValue();
            case VALUE_TRUE: return Boolean.TRUE;
            case VALUE_FALSE: return Boolean.FALSE;
            case VALUE_NULL: return null;
            default: throw error(parser, "unexpected " + token);
        }
    }

    private static Map<String, Object> object(JsonParser parser, int depth) throws IOException {
        deepest(parser, depth);
        Map<String, Object> map = new LinkedHashMap<>();
        for (JsonToken token = next(parser); token != JsonToken.END_OBJECT; token = next(parser)) {
            // Jackson's parser gives only a FIELD_NAME here: anything else is a document it refused already.
            String name = parser.getText();
            map.put(name, value(parser, next(parser), depth));
        }
        return map;
    }

    private static List<Object> array(JsonParser parser, int depth) throws IOException {
        deepest(parser, depth);
        List<Object> list = new ArrayList<>();
        for (JsonToken token = next(parser); token != JsonToken.END_ARRAY; token = next(parser)) {
            list.add(value(parser, token, depth));
        }
        return list;
    }

    private static Long whole(JsonParser parser) throws IOException {
        JsonParser.NumberType type = parser.getNumberType();
        if (type != JsonParser.NumberType.INT && type != JsonParser.NumberType.LONG) {
            throw error(parser, "a whole number beyond a long");
        }
        return parser.getLongValue();
    }

    private static void deepest(JsonParser parser, int depth) {
        if (depth > MAX_DEPTH) {
            throw error(parser, "nested deeper than " + MAX_DEPTH + " levels");
        }
    }

    private static JsonToken next(JsonParser parser) throws IOException {
        JsonToken token = parser.nextToken();
        if (token == null) {
            throw error(parser, "unexpected end");
        }
        return token;
    }

    private static IllegalArgumentException error(JsonParser parser, String what) {
        return new IllegalArgumentException("JSON: " + what + " at " + parser.getTokenLocation().getCharOffset());
    }
}
