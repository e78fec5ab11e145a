package io.statusstore.agent;

import io.statusstore.agent.path.AgentLines;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class WarningsTest {
    @Test
    void aCauseIsLoggedAtMostOnceAMinuteAndItsNextLineCountsTheRest() {
        AtomicLong now = new AtomicLong(1_000);
        Warnings warnings = new Warnings(now::get);
        assertTrue(warnings.warn("a", "first"));
        assertFalse(warnings.warn("a", "again"));
        assertTrue(warnings.warn("b", "another cause, its own minute"));
        now.addAndGet(Warnings.INTERVAL_MS - 1);
        assertFalse(warnings.warn("a", "still within the minute"));
        now.addAndGet(1);
        assertTrue(warnings.warn("a", "a minute later"));
        assertFalse(warnings.warn("a", "and again"));
    }

    @Test
    void aRepeatNotToBeLoggedIsCountedInItsCausesNextLine() throws Exception {
        AgentLines log = new AgentLines();
        AtomicLong now = new AtomicLong(1_000);
        Warnings warnings = new Warnings(now::get);
        warnings.repeated("b");
        assertTrue(warnings.warn("a", "a's first line"));
        now.addAndGet(Warnings.INTERVAL_MS);
        warnings.repeated("a");
        warnings.repeated("a");
        assertTrue(warnings.warn("a", "a's next line"));
        assertTrue(warnings.warn("b", "b's first line"));
        List<String> lines = log.lines();
        assertEquals(3, lines.size(), lines.toString());
        assertTrue(lines.get(0).endsWith("status-store agent: a's first line"), lines.toString());
        assertTrue(lines.get(1).endsWith("a's next line (2 more like it since the last such line)"), lines.toString());
        assertTrue(lines.get(2).endsWith("status-store agent: b's first line"), "nothing to count before: " + lines);
    }
}
