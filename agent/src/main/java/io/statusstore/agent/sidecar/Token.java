package io.statusstore.agent.sidecar;

import io.statusstore.agent.AgentLog;
import io.statusstore.agent.Warnings;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.function.LongSupplier;

/**
 * The bearer token the agent sends: the one it was given (the environment variable), or the one in
 * {@code token.file}, read again when the file changes, so that a rotated token (a Kubernetes secret updated in place)
 * needs no restart of the worker.
 *
 * <p>The file is looked at on use, at most once per {@link #CHECK_MS}: its modification time and size. A change is
 * taken once the file holds a token and has not changed for {@link #SETTLED_MS}, so a file caught half-written never
 * replaces a good token with a bad one; a file that cannot be read, or holds no token, keeps the last good token, with
 * one line (at most once a minute).
 */
public final class Token {
    /** The file is looked at no more often than this. */
    static final long CHECK_MS = 1_000;
    /** A changed file is taken once unchanged for this long (a writer still writing it has not finished). */
    static final long SETTLED_MS = 1_000;

    private final Path file;
    private final LongSupplier clockMs;
    private final Warnings warnings;
    private String token;
    private long checkedAt = Long.MIN_VALUE / 2;
    /** The modification time and size of the file whose token is {@link #token}. */
    private long takenModified;
    private long takenSize;

    private Token(String token, Path file, long modified, long size, LongSupplier clockMs, Warnings warnings) {
        this.token = token;
        this.file = file;
        this.takenModified = modified;
        this.takenSize = size;
        this.clockMs = clockMs;
        this.warnings = warnings;
    }

    /**
     * The token of {@code tokenFile} (read again when it changes), {@code first} being what it held at the agent's
     * start; without a file, {@code first} for good (null: no token).
     */
    public static Token from(String tokenFile, String first) {
        if (tokenFile == null) {
            return new Token(first, null, 0, 0, System::currentTimeMillis, new Warnings());
        }
        return file(Paths.get(tokenFile), first, System::currentTimeMillis, new Warnings());
    }

    /** As {@link #from}, with its own wall clock (ms) and warnings, for tests. */
    static Token file(Path file, String first, LongSupplier clockMs, Warnings warnings) {
        long modified = 0;
        long size = -1;
        try {
            modified = Files.getLastModifiedTime(file).toMillis();
            size = Files.size(file);
        } catch (IOException | RuntimeException e) {
            // Looked at again on the first use.
        }
        return new Token(first, file, modified, size, clockMs, warnings);
    }

    /** The token to send now, or null for none. */
    public synchronized String current() {
        if (file == null) {
            return token;
        }
        long now = clockMs.getAsLong();
        if (now - checkedAt < CHECK_MS) {
            return token;
        }
        checkedAt = now;
        long modified;
        long size;
        String text;
        try {
            modified = Files.getLastModifiedTime(file).toMillis();
            size = Files.size(file);
            if (modified == takenModified && size == takenSize) {
                return token;
            }
            if (now - modified < SETTLED_MS) {
                // Changed within the last second: maybe still being written; looked at again on a later use.
                return token;
            }
            byte[] read = Files.readAllBytes(file);
            if (read.length != size || Files.getLastModifiedTime(file).toMillis() != modified) {
                // Written to while it was read: looked at again on a later use.
                return token;
            }
            text = new String(read, StandardCharsets.UTF_8).trim();
        } catch (IOException | RuntimeException e) {
            warnings.warn("token.file unreadable", "token.file '" + file + "' cannot be read (" + e
                    + "): the token read before is kept");
            return token;
        }
        if (text.isEmpty()) {
            warnings.warn("token.file empty", "token.file '" + file + "' holds no token: the token read before is kept");
            return token;
        }
        takenModified = modified;
        takenSize = size;
        if (!text.equals(token)) {
            token = text;
            AgentLog.info("token.file '" + file + "' changed: its new token is sent from now on");
        }
        return token;
    }
}
