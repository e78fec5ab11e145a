package io.statusstore.agent.path;

import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The agent's log lines written while a test runs: SLF4J's simple logger, the tests' binding, writes them to
 * target/agent-tests.log (test resources' simplelogger.properties); this reads what was added since it was made.
 */
public final class AgentLines {
    private static final String FILE = "target/agent-tests.log";

    private final long start;

    public AgentLines() throws IOException {
        // The logger opens (and empties) its file when first used: before the length is taken.
        LoggerFactory.getLogger("io.statusstore.agent");
        try (RandomAccessFile file = new RandomAccessFile(FILE, "rw")) {
            start = file.length();
        }
    }

    /** The agent's lines so far (each with "status-store agent:"); the lines of stack traces are not among them. */
    public List<String> lines() throws IOException {
        List<String> lines = new ArrayList<>();
        for (String line : text().split("\n")) {
            if (line.contains("status-store agent:")) {
                lines.add(line);
            }
        }
        return lines;
    }

    /** How many lines were written so far, stack traces' included. */
    public int allLines() throws IOException {
        String text = text();
        return text.isEmpty() ? 0 : text.split("\n").length;
    }

    private String text() throws IOException {
        try (RandomAccessFile file = new RandomAccessFile(FILE, "r")) {
            byte[] bytes = new byte[(int) (file.length() - start)];
            file.seek(start);
            file.readFully(bytes);
            return new String(bytes, StandardCharsets.UTF_8);
        }
    }
}
