package io.statusstore.agent.sidecar;

import io.statusstore.agent.Warnings;
import io.statusstore.agent.path.AgentLines;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/** token.file read again when it changes, on the agent's own clock: never a half-written or missing file's token. */
class TokenTest {
    private static final long T0 = 1_800_000_000_000L;

    private final AtomicLong clock = new AtomicLong(T0);
    private final Warnings warnings = new Warnings(clock::get);
    private AgentLines log;

    @BeforeEach
    void lines() throws Exception {
        log = new AgentLines();
    }

    /** The agent's lines about token.file since the test began. */
    private long warned() throws Exception {
        return log.lines().stream().filter(line -> line.contains("the token read before is kept")).count();
    }

    private static Path write(Path file, String text, long modifiedAt) throws Exception {
        Files.write(file, text.getBytes(StandardCharsets.UTF_8));
        Files.setLastModifiedTime(file, FileTime.fromMillis(modifiedAt));
        return file;
    }

    @Test
    void aRotatedFileIsTakenOnUseAtMostOnceASecond(@TempDir Path dir) throws Exception {
        Path file = write(dir.resolve("token"), "old\n", T0 - 60_000);
        Token token = Token.file(file, "old", clock::get, warnings);
        assertEquals("old", token.current());
        write(file, "new\n", T0 - 5_000);
        clock.addAndGet(500);
        assertEquals("old", token.current(), "looked at no more than once a second");
        clock.addAndGet(600);
        assertEquals("new", token.current());
        assertEquals(0, warned());
    }

    @Test
    void aFileChangedWithinTheLastSecondIsNotTakenYet(@TempDir Path dir) throws Exception {
        Path file = write(dir.resolve("token"), "good\n", T0 - 60_000);
        Token token = Token.file(file, "good", clock::get, warnings);
        clock.addAndGet(2_000);
        // A writer caught half-way: what the file holds now may be a part of the new token.
        write(file, "ne", clock.get() - 10);
        assertEquals("good", token.current());
        clock.addAndGet(1_100);
        write(file, "new-token\n", clock.get() - 1_050);
        assertEquals("new-token", token.current(), "once unchanged for a second");
    }

    @Test
    void aMissingOrEmptyFileKeepsTheLastGoodTokenWithOneLine(@TempDir Path dir) throws Exception {
        Path file = write(dir.resolve("token"), "good\n", T0 - 60_000);
        Token token = Token.file(file, "good", clock::get, warnings);
        Files.delete(file);
        for (int i = 0; i < 5; i++) {
            clock.addAndGet(1_000);
            assertEquals("good", token.current());
        }
        assertEquals(1, warned(), "one line a minute, not one a second");
        write(file, "  \n", clock.get() - 5_000);
        clock.addAndGet(1_000);
        assertEquals("good", token.current());
        assertEquals(2, warned());
        write(file, "next\n", clock.get() - 5_000);
        clock.addAndGet(1_000);
        assertEquals("next", token.current());
    }

    @Test
    void withoutAFileTheTokenGivenStands() {
        assertEquals("t", Token.from(null, "t").current());
        assertNull(Token.from(null, null).current());
    }
}
