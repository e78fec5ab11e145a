package io.statusstore.agent.json;

import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class JsonTreeTest {
    @Test
    void readsTheSidecarsAnswerShape() {
        Object json = JsonTree.parse("{ \"instance\": \"i-1\", \"accepted\": [ {\"seq\": 17, \"result\": \"pending\"} ],\n"
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
        assertEquals("a\"\\/\b\f\n\r\té\uD83D\uDE00", JsonTree.parse("\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\""));
        assertEquals(Arrays.asList(1L, "中"), JsonTree.parse("[1,\"中\"]"));
    }

    @Test
    void refusesMalformedDocuments() {
        for (String bad : new String[] {"", "{", "{\"a\" 1}", "[1,]", "\"abc", "tru", "{} x", "\"\\q\"", "\"a\nb\"",
                "1 2", "{} {}", "[1] [", "{\"a\":1,}", "'a'", "NaN", "// c\n1", "{\"a\":1 \"b\":2}"}) {
            assertThrows(IllegalArgumentException.class, () -> JsonTree.parse(bad), bad);
        }
    }

    @Test
    void refusesDocumentsNestedDeeperThanItsBound() {
        // A peer's answer nested 100,000 levels deep overflowed the stack of the thread reading it.
        StringBuilder deep = new StringBuilder();
        for (int i = 0; i < 100_000; i++) {
            deep.append(i % 2 == 0 ? "[" : "{\"a\":");
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> JsonTree.parse(deep.toString()));
        assertTrue(e.getMessage().contains("nested deeper than " + JsonTree.MAX_DEPTH), e.getMessage());
        StringBuilder atBound = new StringBuilder();
        for (int i = 0; i < JsonTree.MAX_DEPTH; i++) {
            atBound.append('[');
        }
        for (int i = 0; i < JsonTree.MAX_DEPTH; i++) {
            atBound.append(']');
        }
        JsonTree.parse(atBound.toString());
        assertThrows(IllegalArgumentException.class, () -> JsonTree.parse("[" + atBound + "]"));
    }

    @Test
    void readsWholeNumbersAsLongsAndRefusesThoseBeyond() {
        assertEquals(Long.MAX_VALUE, JsonTree.parse(Long.toString(Long.MAX_VALUE)));
        assertEquals(Long.MIN_VALUE, JsonTree.parse(Long.toString(Long.MIN_VALUE)));
        assertEquals(7L, JsonTree.parse("7"));
        assertEquals(1e3, JsonTree.parse("1e3"));
        assertThrows(IllegalArgumentException.class, () -> JsonTree.parse("9223372036854775808"));
        assertThrows(IllegalArgumentException.class, () -> JsonTree.parse("[-9223372036854775809]"));
        String longNumber = new String(new char[5000]).replace('\0', '1');
        assertThrows(IllegalArgumentException.class, () -> JsonTree.parse(longNumber));
        assertThrows(IllegalArgumentException.class, () -> JsonTree.parse("[" + longNumber + ".5e1]"));
    }

    @Test
    void keepsTheLastOfARepeatedName() {
        assertEquals(2L, ((Map<?, ?>) JsonTree.parse("{\"a\":1,\"a\":2}")).get("a"));
    }

    @Test
    void readsTheJacksonOfTheClassPath() {
        // Each surefire execution puts one Connect line's jackson-core on the class path (pom.xml).
        ClassLoader loader = JsonTree.class.getClassLoader();
        assertNull(Jackson.missing(loader));
        assertEquals("jackson-core " + System.getProperty("jackson.expected"), Jackson.version(loader));
    }

    @Test
    void saysSoWhereTheLoaderHasNoJackson() throws Exception {
        // Only the JDK's classes: the loader of an agent on a class path without Jackson.
        try (java.net.URLClassLoader bare = new java.net.URLClassLoader(new java.net.URL[0], null)) {
            String why = Jackson.missing(bare);
            assertTrue(why != null && why.contains("jackson-core"), why);
        }
    }
}
