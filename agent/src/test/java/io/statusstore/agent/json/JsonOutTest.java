package io.statusstore.agent.json;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class JsonOutTest {
    private static String quoted(String s) {
        return new JsonOut().value(s).toString();
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
    void writesNonAsciiAsRawUtf8() {
        assertEquals("\"é中\u2028\u007f\"", quoted("é中\u2028\u007f"));
        assertEquals("\"é中\"", new String(new JsonOut().value("é中").toBytes(), StandardCharsets.UTF_8));
    }

    @Test
    void escapesSurrogatesLoneOnesIncludedSoUtf8CarriesThem() {
        assertEquals("\"a\\uD83Db\\uDE00\"", quoted("a\uD83Db\uDE00"));
        String pair = "\uD83D\uDE00";
        assertEquals(pair, JsonTree.parse(quoted(pair)));
    }

    @Test
    void writesNestedStructuresCompactly() {
        String json = new JsonOut().beginObject()
                .name("a").value(1)
                .name("b").beginArray().value("x").nullValue().beginObject().endObject().value(true).endArray()
                .name("c").beginObject().name("d").value(-2).endObject()
                .name("e").value((String) null)
                .endObject().toString();
        assertEquals("{\"a\":1,\"b\":[\"x\",null,{},true],\"c\":{\"d\":-2},\"e\":null}", json);
    }

    @Test
    void refusesAValueWhereANameBelongs() {
        assertThrows(IllegalStateException.class, () -> new JsonOut().beginObject().value("no name"));
    }

    @Test
    void roundTripsThroughTheReader() {
        String text = "q\"\\\u0001\n\té中\uD83D\uDE00\uDE00";
        assertEquals(text, JsonTree.parse(quoted(text)));
    }
}
