package io.statusstore.agent;

import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicLong;

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
}
