package io.statusstore.agent.path;

import io.statusstore.agent.json.JsonOut;
import io.statusstore.agent.json.JsonTree;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.Proxy;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The agent protocol's transcript (protocol-transcript.json) replayed against {@link FakeSidecar}: it answers every
 * request as written there, as tests/test_agent_transcript.py checks the real sidecar does. So the fake the agent's
 * tests rely on answers as the sidecar does, case by case.
 */
class TranscriptTest {
    private static final long UNTIL_MS = 10_000;

    @TestFactory
    Collection<DynamicTest> theFakeSidecarAnswersAsTheTranscriptSays() throws IOException {
        Map<?, ?> transcript;
        try (InputStream in = TranscriptTest.class.getResourceAsStream("/protocol-transcript.json")) {
            transcript = (Map<?, ?>) JsonTree.parse(text(in));
        }
        List<DynamicTest> tests = new ArrayList<>();
        for (Object c : (List<?>) transcript.get("cases")) {
            Map<?, ?> replay = (Map<?, ?>) c;
            tests.add(DynamicTest.dynamicTest((String) replay.get("name"), () -> replay(replay)));
        }
        return tests;
    }

    private static void replay(Map<?, ?> replay) throws Exception {
        FakeSidecar sidecar = new FakeSidecar(new Topic());
        Map<?, ?> settings = replay.containsKey("settings") ? (Map<?, ?>) replay.get("settings") : new LinkedHashMap<>();
        sidecar.token = (String) settings.get("sidecar.rest.token");
        if (settings.containsKey("status.storage.retry.max.pending")) {
            sidecar.maxPending = Integer.parseInt((String) settings.get("status.storage.retry.max.pending"));
        }
        if (settings.containsKey("status.storage.retry.max.retries")) {
            sidecar.maxRetries = Integer.parseInt((String) settings.get("status.storage.retry.max.retries"));
        }
        sidecar.start();
        try {
            String instance = (String) ((Map<?, ?>) JsonTree.parse(call(sidecar, "GET", "/", null, null).body))
                    .get("instance");
            int number = 0;
            for (Object s : (List<?>) replay.get("steps")) {
                Map<?, ?> step = (Map<?, ?>) s;
                if (step.containsKey("kafka")) {
                    if (step.get("kafka").equals("away") || step.get("kafka").equals("down")) {
                        sidecar.writeAtOnce = false;
                        boolean down = step.get("kafka").equals("down");
                        sidecar.timedOut = down;
                        // The broker down: each write's attempt is in flight until the write bound (the producer's
                        // delivery timeout) fails it, counted here from the request that ends the lease.
                        Object given = settings.get("status.storage.retry.delivery.timeout.ms");
                        long bound = given == null ? -1 : Long.parseLong((String) given);
                        sidecar.inFlight = down;
                        sidecar.attemptFailsAfterMs = down ? bound : -1;
                        sidecar.timedOutAfterMs = Math.max(0, bound);
                    } else {
                        sidecar.writeAtOnce = true;
                        sidecar.timedOut = false;
                        sidecar.inFlight = false;
                        sidecar.release();
                    }
                } else if (step.containsKey("sleep_ms")) {
                    Thread.sleep((Long) step.get("sleep_ms"));
                } else {
                    answeredAsWritten(sidecar, step, instance, "step " + number);
                }
                number++;
            }
        } finally {
            sidecar.stop();
        }
    }

    private static void answeredAsWritten(FakeSidecar sidecar, Map<?, ?> step, String instance, String where)
            throws Exception {
        Map<?, ?> expect = (Map<?, ?>) step.get("expect");
        long deadline = System.nanoTime() / 1_000_000 + UNTIL_MS;
        List<String> found;
        while (true) {
            boolean wake = step.containsKey("wake");
            Answer answer = call(sidecar, "POST", wake ? "/agent/wake" : "/agent/statuses",
                    filled(step.get(wake ? "wake" : "post"), instance), (String) step.get("token"));
            found = new ArrayList<>();
            differences(expect.get("status"), (long) answer.status, instance, "status", found);
            differences(expect.get("body"), JsonTree.parse(answer.body), instance, "body", found);
            Map<?, ?> headers = expect.containsKey("headers") ? (Map<?, ?>) expect.get("headers") : new LinkedHashMap<>();
            for (Map.Entry<?, ?> header : headers.entrySet()) {
                String value = answer.headers.get((String) header.getKey());
                if (value == null || (!"*".equals(header.getValue()) && !header.getValue().equals(value))) {
                    found.add("header " + header.getKey() + ": " + value + ", not " + header.getValue());
                }
            }
            if (found.isEmpty() || !Boolean.TRUE.equals(step.get("until")) || System.nanoTime() / 1_000_000 > deadline) {
                break;
            }
            Thread.sleep(50);
        }
        assertEquals(new ArrayList<String>(), found, where);
    }

    /** A request body with "$now" and "$instance" filled in. */
    private static String filled(Object template, String instance) {
        JsonOut w = new JsonOut();
        write(w, template, instance);
        return w.toString();
    }

    private static void write(JsonOut w, Object value, String instance) {
        if ("$now".equals(value)) {
            w.value(System.currentTimeMillis());
        } else if ("$instance".equals(value)) {
            w.value(instance);
        } else if (value instanceof Map) {
            w.beginObject();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                w.name((String) e.getKey());
                write(w, e.getValue(), instance);
            }
            w.endObject();
        } else if (value instanceof List) {
            w.beginArray();
            for (Object item : (List<?>) value) {
                write(w, item, instance);
            }
            w.endArray();
        } else if (value instanceof String) {
            w.value((String) value);
        } else if (value instanceof Long) {
            w.value((Long) value);
        } else if (value instanceof Boolean) {
            w.value((Boolean) value);
        } else {
            w.value((String) null);
        }
    }

    /** Where {@code actual} is not what the transcript expects ("*": anything; "$instance": the instance). */
    private static void differences(Object expected, Object actual, String instance, String where, List<String> found) {
        if ("*".equals(expected)) {
            return;
        }
        if ("$instance".equals(expected)) {
            if (!instance.equals(actual)) {
                found.add(where + ": " + actual + ", not the instance " + instance);
            }
            return;
        }
        if (expected instanceof Map) {
            if (!(actual instanceof Map) || !((Map<?, ?>) expected).keySet().equals(((Map<?, ?>) actual).keySet())) {
                found.add(where + ": " + actual + " has not the keys of " + expected);
                return;
            }
            for (Map.Entry<?, ?> e : ((Map<?, ?>) expected).entrySet()) {
                differences(e.getValue(), ((Map<?, ?>) actual).get(e.getKey()), instance, where + "." + e.getKey(), found);
            }
            return;
        }
        if (expected instanceof List) {
            List<?> list = (List<?>) expected;
            if (!(actual instanceof List) || ((List<?>) actual).size() != list.size()) {
                found.add(where + ": " + actual + ", not " + expected);
                return;
            }
            for (int i = 0; i < list.size(); i++) {
                differences(list.get(i), ((List<?>) actual).get(i), instance, where + "[" + i + "]", found);
            }
            return;
        }
        if (expected == null ? actual != null : !expected.equals(actual)) {
            found.add(where + ": " + actual + ", not " + expected);
        }
    }

    private static final class Answer {
        final int status;
        final String body;
        final Map<String, String> headers = new LinkedHashMap<>();

        Answer(int status, String body) {
            this.status = status;
            this.body = body;
        }
    }

    private static Answer call(FakeSidecar sidecar, String method, String path, String body, String token)
            throws IOException {
        HttpURLConnection c = (HttpURLConnection) new URL(sidecar.url() + path).openConnection(Proxy.NO_PROXY);
        c.setRequestMethod(method);
        c.setConnectTimeout(5_000);
        c.setReadTimeout(15_000);
        if (token != null) {
            c.setRequestProperty("Authorization", "Bearer " + token);
        }
        if (body != null) {
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            c.setDoOutput(true);
            c.setRequestProperty("Content-Type", "application/json");
            try (OutputStream out = c.getOutputStream()) {
                out.write(bytes);
            }
        }
        int status = c.getResponseCode();
        Answer answer = new Answer(status, text(status >= 400 ? c.getErrorStream() : c.getInputStream()));
        for (String name : new String[] {"Retry-After", "WWW-Authenticate"}) {
            if (c.getHeaderField(name) != null) {
                answer.headers.put(name, c.getHeaderField(name));
            }
        }
        return answer;
    }

    private static String text(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buffer = new byte[8192];
        int n;
        while ((n = in.read(buffer)) > 0) {
            out.write(buffer, 0, n);
        }
        return new String(out.toByteArray(), StandardCharsets.UTF_8);
    }
}
