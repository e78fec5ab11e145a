package io.statusstore.agent.json;

import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class JsonReaderTest {
    @Test
    void readsTheSidecarsAnswerShape() {
        Object json = JsonReader.parse("{ \"instance\": \"i-1\", \"accepted\": [ {\"seq\": 17, \"result\": \"pending\"} ],\n"
                + "  \"outcomes\": [], \"x\": {\"f\": 1.5, \"t\": true, \"n\": null, \"neg\": -3} }");
        Map<?, ?> map = (Map<?, ?>) json;
        assertEquals("i-1", map.get("instance"));
        List<?> accepted = (List<?>) map.get("accepted");
        assertEquals(17L, ((Map<?, ?>) accepted.get(0)).get("seq"));
        Map<?, ?> x = (Map<?, ?>) map.get("x");
        assertEquals(1.5, x.get("f"));
        assertEquals(Boolean.TRUE, x.get("t"));
        assertTrue(x.containsKey("n"));
        assertNull(x.get("n"));
        assertEquals(-3L, x.get("neg"));
    }

    @Test
    void readsEscapesAndSurrogatePairs() {
        assertEquals("a\"\\/\b\f\n\r\té\uD83D\uDE00", JsonReader.parse("\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\""));
        assertEquals(Arrays.asList(1L, "中"), JsonReader.parse("[1,\"中\"]"));
    }

    @Test
    void refusesMalformedDocuments() {
        for (String bad : new String[] {"", "{", "{\"a\" 1}", "[1,]", "\"abc", "tru", "{} x", "\"\\q\"", "\"a\nb\""}) {
            assertThrows(IllegalArgumentException.class, () -> JsonReader.parse(bad), bad);
        }
    }

    @Test
    void refusesDocumentsNestedDeeperThanItsBound() {
        // A peer's answer nested 100,000 levels deep overflowed the stack of the thread reading it.
        StringBuilder deep = new StringBuilder();
        for (int i = 0; i < 100_000; i++) {
            deep.append(i % 2 == 0 ? "[" : "{\"a\":");
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> JsonReader.parse(deep.toString()));
        assertTrue(e.getMessage().contains("nested deeper than " + JsonReader.MAX_DEPTH), e.getMessage());
        StringBuilder atBound = new StringBuilder();
        for (int i = 0; i < JsonReader.MAX_DEPTH; i++) {
            atBound.append('[');
        }
        for (int i = 0; i < JsonReader.MAX_DEPTH; i++) {
            atBound.append(']');
        }
        JsonReader.parse(atBound.toString());
        assertThrows(IllegalArgumentException.class, () -> JsonReader.parse("[" + atBound + "]"));
    }
}
