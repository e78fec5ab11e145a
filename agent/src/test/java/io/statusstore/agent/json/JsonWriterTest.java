package io.statusstore.agent.json;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

class JsonWriterTest {
    private static String quoted(String s) {
        return new JsonWriter().value(s).toString();
    }

    @Test
    void escapesQuoteBackslashAndShortControlForms() {
        assertEquals("\"a\\\"b\\\\c\\b\\f\\n\\r\\t\"", quoted("a\"b\\c\b\f\n\r\t"));
    }

    @Test
    void escapesOtherControlCharactersInUpperCaseHex() {
        assertEquals("\"\\u0000\\u0001\\u001F\\u000B\"", quoted("\u0000\u0001\u001f\u000b"));
    }

    @Test
    void writesNonAsciiRaw() {
        assertEquals("\"é中\u2028\u007f\"", quoted("é中\u2028\u007f"));
        assertEquals("\"\uD83D\uDE00\"", quoted("\uD83D\uDE00"));
    }

    @Test
    void escapesLoneSurrogates() {
        assertEquals("\"a\\uD83Db\\uDE00\"", quoted("a\uD83Db\uDE00"));
    }

    @Test
    void writesNestedStructuresCompactly() {
        String json = new JsonWriter().beginObject()
                .name("a").value(1)
                .name("b").beginArray().value("x").nullValue().beginObject().endObject().value(true).endArray()
                .name("c").beginObject().name("d").value(-2).endObject()
                .name("e").value((String) null)
                .endObject().toString();
        assertEquals("{\"a\":1,\"b\":[\"x\",null,{},true],\"c\":{\"d\":-2},\"e\":null}", json);
    }

    @Test
    void roundTripsThroughTheReader() {
        String text = "q\"\\\u0001\n\té中\uD83D\uDE00";
        assertEquals(text, JsonReader.parse(quoted(text)));
    }
}
