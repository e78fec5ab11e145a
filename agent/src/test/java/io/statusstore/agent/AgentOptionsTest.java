package io.statusstore.agent;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class AgentOptionsTest {
    private static final Map<String, String> NO_ENV = Collections.emptyMap();

    private static String error(String args, Map<String, String> env) {
        return assertThrows(AgentOptions.OptionsException.class, () -> AgentOptions.parse(args, env)).getMessage();
    }

    @Test
    void defaultsWithoutOptions() throws Exception {
        AgentOptions o = AgentOptions.parse(null, NO_ENV);
        assertEquals("http://127.0.0.1:8084", o.url.toString());
        assertNull(o.token);
        assertEquals(10_000, o.maxKeys);
        assertEquals(15_000, o.fallbackAfterMs);
        assertEquals(4_000, o.leaseMs);
        assertEquals(500, o.connectTimeoutMs);
        assertEquals(2_000, o.readTimeoutMs);
        assertEquals(1_000, o.pollIntervalMs);
        assertEquals(500, o.batchSize);
        assertEquals(AgentOptions.parse("", NO_ENV).url, o.url);
    }

    @Test
    void readsEveryOption(@TempDir Path dir) throws Exception {
        Path token = dir.resolve("token");
        Files.write(token, "s3cret\n".getBytes(StandardCharsets.UTF_8));
        AgentOptions o = AgentOptions.parse("url=https://sidecar.ns.svc:9000/x,token.file=" + token
                + ",max.keys=7, batch.size=3,fallback.after.ms=0,lease.ms=9000,connect.timeout.ms=10,"
                + "read.timeout.ms=20,poll.interval.ms=30,probe.interval.ms=40,quiet.timeout.ms=50,"
                + "stop.timeout.ms=60,flush.timeout.ms=70", NO_ENV);
        assertEquals("https://sidecar.ns.svc:9000/x", o.url.toString());
        assertEquals("s3cret", o.token);
        assertEquals(7, o.maxKeys);
        assertEquals(3, o.batchSize);
        assertEquals(0, o.fallbackAfterMs);
        assertEquals(9000, o.leaseMs);
        assertEquals(10, o.connectTimeoutMs);
        assertEquals(20, o.readTimeoutMs);
        assertEquals(30, o.pollIntervalMs);
        assertEquals(40, o.probeIntervalMs);
        assertEquals(50, o.quietTimeoutMs);
        assertEquals(60, o.stopTimeoutMs);
        assertEquals(70, o.flushTimeoutMs);
        assertTrue(o.describe().contains("token=set"));
        assertTrue(!o.describe().contains("s3cret"));
    }

    @Test
    void takesTheTokenFromTheEnvironmentWithoutAFile() throws Exception {
        assertEquals("t0k", AgentOptions.parse("", Collections.singletonMap(AgentOptions.TOKEN_ENV, " t0k ")).token);
    }

    @Test
    void namesWhatIsWrong(@TempDir Path dir) throws Exception {
        assertTrue(error("urll=http://x", NO_ENV).startsWith("unknown option 'urll'"));
        assertEquals("option 'max.keys' is not key=value", error("max.keys", NO_ENV));
        assertEquals("option 'max.keys' given twice", error("max.keys=1,max.keys=2", NO_ENV));
        assertEquals("max.keys='ten' is not a whole number", error("max.keys=ten", NO_ENV));
        assertEquals("max.keys=0 is out of range [1, 2147483647]", error("max.keys=0", NO_ENV));
        assertTrue(error("url=ftp://x", NO_ENV).contains("is not http:// or https://"));
        assertTrue(error("url=nonsense", NO_ENV).startsWith("url 'nonsense' is not a URL"));
        assertTrue(error("lease.ms=1000", NO_ENV).startsWith("lease.ms=1000 must exceed connect.timeout.ms + read.timeout.ms + poll.interval.ms (3500)"));
        assertTrue(error("url=http://x,", NO_ENV).startsWith("option '' is not key=value"));
    }

    @Test
    void aMissingOrEmptyTokenFileIsAnError(@TempDir Path dir) throws Exception {
        Path missing = dir.resolve("absent");
        assertTrue(error("token.file=" + missing, NO_ENV).startsWith("token.file '" + missing + "' cannot be read"));
        Path empty = Files.createFile(dir.resolve("empty"));
        assertEquals("token.file '" + empty + "' holds no token", error("token.file=" + empty, NO_ENV));
        // A file named but unreadable is an error even when the environment has a token.
        assertTrue(error("token.file=" + missing, Collections.singletonMap(AgentOptions.TOKEN_ENV, "t"))
                .contains("cannot be read"));
    }
}
