package io.statusstore.agent;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
        // The sidecar takes a lease of at most an hour and 10,000 updates a request (422 above, PROTOCOL.md): an agent
        // given more would never hand a status over, each probe answered 422. Refused here, naming the key.
        assertEquals("lease.ms=3600001 is out of range [1, 3600000]", error("lease.ms=3600001", NO_ENV));
        assertEquals("batch.size=10001 is out of range [1, 10000]", error("batch.size=10001", NO_ENV));
        assertEquals(3_600_000, AgentOptions.parse("lease.ms=3600000", NO_ENV).leaseMs);
        assertEquals(10_000, AgentOptions.parse("batch.size=10000", NO_ENV).batchSize);
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

    private static Map<String, String> env(String... pairs) {
        Map<String, String> env = new HashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            env.put(pairs[i], pairs[i + 1]);
        }
        return env;
    }

    private static Path file(Path dir, String text) throws Exception {
        return Files.write(dir.resolve("agent.properties"), text.getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void takesOptionsFromEnvironmentVariablesNamedAfterThem() throws Exception {
        AgentOptions o = AgentOptions.parse(null, env("STATUS_STORE_AGENT_URL", "http://sidecar:9000",
                "STATUS_STORE_AGENT_MAX_KEYS", "7", "STATUS_STORE_AGENT_FALLBACK_AFTER_MS", "0", "PATH", "/bin"));
        assertEquals("http://sidecar:9000", o.url.toString());
        assertEquals(7, o.maxKeys);
        assertEquals(0, o.fallbackAfterMs);
        assertTrue(o.describe().endsWith("; from STATUS_STORE_AGENT_* variables"), o.describe());
        // Set but empty is not set (a manifest's placeholder).
        assertEquals(10_000, AgentOptions.parse(null, env("STATUS_STORE_AGENT_MAX_KEYS", " ")).maxKeys);
    }

    @Test
    void takesOptionsFromTheFileAnOptionOrAVariableNames(@TempDir Path dir) throws Exception {
        Path token = Files.write(dir.resolve("token"), "t0k".getBytes(StandardCharsets.UTF_8));
        Path file = file(dir, "# the agent's options\nurl = http://sidecar:9000\nmax.keys=7\ntoken.file=" + token + "\n");
        AgentOptions fromString = AgentOptions.parse("config.file=" + file, NO_ENV);
        assertEquals("http://sidecar:9000", fromString.url.toString());
        assertEquals(7, fromString.maxKeys);
        assertEquals("t0k", fromString.token);
        assertTrue(fromString.describe().endsWith("; from the -javaagent string, the file " + file),
                fromString.describe());
        AgentOptions fromEnv = AgentOptions.parse(null, env("STATUS_STORE_AGENT_CONFIG_FILE", file.toString()));
        assertEquals(7, fromEnv.maxKeys);
    }

    @Test
    void theStringWinsOverTheEnvironmentWhichWinsOverTheFile(@TempDir Path dir) throws Exception {
        Path file = file(dir, "url=http://from-file:1\nmax.keys=1\nbatch.size=1\n");
        AgentOptions o = AgentOptions.parse("config.file=" + file + ",url=http://from-string:3",
                env("STATUS_STORE_AGENT_URL", "http://from-env:2", "STATUS_STORE_AGENT_MAX_KEYS", "2"));
        assertEquals("http://from-string:3", o.url.toString());
        assertEquals(2, o.maxKeys);
        assertEquals(1, o.batchSize);
        assertTrue(o.describe().endsWith(
                "; from the -javaagent string, STATUS_STORE_AGENT_* variables, the file " + file), o.describe());
    }

    @Test
    void enabledFalseFromAnySourceLeavesTheWorkerAlone(@TempDir Path dir) throws Exception {
        AgentOptions off = AgentOptions.parse("enabled=false", NO_ENV);
        assertFalse(off.enabled);
        assertEquals("enabled=false in the -javaagent string", off.disabledBy());
        assertEquals("enabled=false in STATUS_STORE_AGENT_ENABLED",
                AgentOptions.parse("url=http://x:1", env("STATUS_STORE_AGENT_ENABLED", "FALSE")).disabledBy());
        Path file = file(dir, "enabled=false\n");
        assertEquals("enabled=false in the file " + file,
                AgentOptions.parse("config.file=" + file, NO_ENV).disabledBy());
        // Off, the rest is neither read nor checked: a bad value, a file that is not there.
        assertFalse(AgentOptions.parse("enabled=false,max.keys=many,config.file=" + dir.resolve("absent"),
                NO_ENV).enabled);
        // The string turns it back on over the environment.
        assertTrue(AgentOptions.parse("enabled=true", env("STATUS_STORE_AGENT_ENABLED", "false")).enabled);
        assertTrue(AgentOptions.parse(null, NO_ENV).enabled);
    }

    @Test
    void aBadValueNamesWhereItCameFrom(@TempDir Path dir) throws Exception {
        assertEquals("max.keys='ten' is not a whole number (STATUS_STORE_AGENT_MAX_KEYS)",
                error(null, env("STATUS_STORE_AGENT_MAX_KEYS", "ten")));
        assertEquals("enabled='no' is not true or false (STATUS_STORE_AGENT_ENABLED)",
                error(null, env("STATUS_STORE_AGENT_ENABLED", "no")));
        assertTrue(error(null, env("STATUS_STORE_AGENT_URLL", "http://x:1"))
                .startsWith("unknown environment variable STATUS_STORE_AGENT_URLL (known: "));
        Path file = file(dir, "max.keys=0\n");
        assertEquals("max.keys=0 is out of range [1, 2147483647] (the file " + file + ")",
                error("config.file=" + file, NO_ENV));
        Path typo = file(dir, "urll=http://x:1\n");
        assertTrue(error("config.file=" + typo, NO_ENV).startsWith("unknown option 'urll' in '" + typo + "'"));
        Path nested = file(dir, "config.file=/etc/other\n");
        assertTrue(error("config.file=" + nested, NO_ENV).contains("names another config.file"));
        Path absent = dir.resolve("absent.properties");
        assertTrue(error("config.file=" + absent, NO_ENV).startsWith("config.file '" + absent + "' cannot be read"));
    }
}
