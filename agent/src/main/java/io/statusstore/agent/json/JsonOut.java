package io.statusstore.agent.json;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * The agent's few, fixed payloads written through the worker's own Jackson (jackson-core's UTF-8 generator, from the
 * worker's class path: see {@link Jackson}): compact, fields in call order.
 *
 * <p>Jackson escapes what JSON requires (quote, backslash, every control character: the short forms, the others as
 * <code>&#92;u00XX</code>) and writes every surrogate as a <code>&#92;u</code> escape, a lone one included, which
 * UTF-8 could not carry; other characters go as raw UTF-8.
 */
public final class JsonOut {
    private static final JsonFactory FACTORY = new JsonFactory();

    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream(256);
    private final JsonGenerator out;

    public JsonOut() {
        try {
            out = FACTORY.createGenerator(bytes);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public JsonOut beginObject() {
        return write(JsonGenerator::writeStartObject);
    }

    public JsonOut endObject() {
        return write(JsonGenerator::writeEndObject);
    }

    public JsonOut beginArray() {
        return write(JsonGenerator::writeStartArray);
    }

    public JsonOut endArray() {
        return write(JsonGenerator::writeEndArray);
    }

    /** Writes a member's name; its value follows. */
    public JsonOut name(String name) {
        return write(g -> g.writeFieldName(name));
    }

    public JsonOut value(String value) {
        return write(g -> g.writeString(value));
    }

    public JsonOut value(long value) {
        return write(g -> g.writeNumber(value));
    }

    public JsonOut value(boolean value) {
        return write(g -> g.writeBoolean(value));
    }

    public JsonOut nullValue() {
        return write(JsonGenerator::writeNull);
    }

    /** The document so far, as UTF-8 bytes. */
    public byte[] toBytes() {
        write(JsonGenerator::flush);
        return bytes.toByteArray();
    }

    /** The document so far (every character it holds survives UTF-8: lone surrogates are escaped). */
    @Override
    public String toString() {
        return new String(toBytes(), StandardCharsets.UTF_8);
    }

    private JsonOut write(Step step) {
        try {
            step.apply(out);
        } catch (IOException e) {
            // Only a bug of the agent's own (a value where a name belongs): the stream is in memory.
            throw new IllegalStateException("JSON: " + e.getMessage(), e);
        }
        return this;
    }

    private interface Step {
        void apply(JsonGenerator generator) throws IOException;
    }
}
