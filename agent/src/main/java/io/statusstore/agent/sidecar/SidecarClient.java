package io.statusstore.agent.sidecar;

import io.statusstore.agent.Daemons;
import io.statusstore.agent.json.JsonTree;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.HttpURLConnection;
import java.net.NoRouteToHostException;
import java.net.Proxy;
import java.net.URL;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLHandshakeException;

/**
 * The agent's calls to the sidecar, over {@link HttpURLConnection}. Nothing it cannot check is believed: any
 * failure to connect, send, read or parse, of any kind, is a {@link SidecarException}, and so is an answer larger
 * than {@link #MAX_ANSWER_BYTES}, nested deeper than {@link JsonTree#MAX_DEPTH} or of another shape.
 *
 * <p>Every call has a total deadline, {@link #deadlineMs()} (connect.timeout.ms + read.timeout.ms): a watchdog
 * thread disconnects a call still running then, so a sidecar that trickles its answer a byte at a time, each
 * within the read timeout, costs the agent's (single) sender thread that long and no longer.
 */
public final class SidecarClient {
    /** The largest answer read; the sidecar bounds the outcomes it sends per answer (PROTOCOL.md). */
    static final int MAX_ANSWER_BYTES = 8 << 20;
    private static final ScheduledExecutorService WATCHDOG =
            Executors.newSingleThreadScheduledExecutor(Daemons.named("status-store-agent-watchdog"));

    private final URL url;
    private final String base;
    private final Token token;
    private final int connectTimeoutMs;
    private final int readTimeoutMs;
    private final SidecarTls tls;
    /** The http:// sidecar's connection ({@link PlainHttp}), or null: https:// goes through HttpsURLConnection. */
    private final PlainHttp plain;

    public SidecarClient(URL url, String token, int connectTimeoutMs, int readTimeoutMs) {
        this(url, Token.from(null, token), connectTimeoutMs, readTimeoutMs, null);
    }

    /**
     * {@code token}: the bearer token to send, read again from its file when that changes (null: none). {@code tls}:
     * an https:// sidecar's CA and this agent's certificate (null: the JVM's defaults).
     */
    public SidecarClient(URL url, Token token, int connectTimeoutMs, int readTimeoutMs, SidecarTls tls) {
        this.url = url;
        String text = url.toString();
        this.base = text.endsWith("/") ? text.substring(0, text.length() - 1) : text;
        this.token = token == null ? Token.from(null, null) : token;
        this.connectTimeoutMs = connectTimeoutMs;
        this.readTimeoutMs = readTimeoutMs;
        this.tls = tls;
        this.plain = "http".equalsIgnoreCase(url.getProtocol()) ? new PlainHttp(url) : null;
    }

    /** {@code GET /}: which cluster and status topic the sidecar serves. */
    public SidecarIdentity identify() throws SidecarException {
        return identify(deadlineMs());
    }

    /** {@link #identify()} within {@code deadlineMs} (at most {@link #deadlineMs()}). */
    public SidecarIdentity identify(long deadlineMs) throws SidecarException {
        String answer = call("GET", "/", null, Math.max(1, Math.min(deadlineMs, deadlineMs())));
        try {
            return SidecarIdentity.from(JsonTree.parse(answer));
        } catch (Throwable t) {
            throw malformed("GET /", t);
        }
    }

    /** {@code GET /ready}: whether the sidecar reads its topics to their end now (200), else why not. */
    public void ready() throws SidecarException {
        ready(deadlineMs());
    }

    /** {@link #ready()} within {@code deadlineMs} (at most {@link #deadlineMs()}). */
    public void ready(long deadlineMs) throws SidecarException {
        call("GET", "/ready", null, Math.max(1, Math.min(deadlineMs, deadlineMs())));
    }

    /** {@code POST /agent/statuses} with an {@link AgentRequest} body; the answer's shape is checked. */
    public AgentAnswer post(String body) throws SidecarException {
        return post(body, deadlineMs());
    }

    /**
     * {@link #post(String)} within {@code deadlineMs} (at most {@link #deadlineMs()}): a call the agent must not let
     * run past a time of its own.
     */
    public AgentAnswer post(String body, long deadlineMs) throws SidecarException {
        String answer = call("POST", "/agent/statuses", body, Math.max(1, Math.min(deadlineMs, deadlineMs())));
        try {
            return AgentAnswer.from(JsonTree.parse(answer));
        } catch (Throwable t) {
            throw malformed("POST /agent/statuses", t);
        }
    }

    /**
     * {@code POST /agent/wake} with an {@link AgentRequest#encodeWake} body: answered 200, whatever it says (a wake only
     * shortens the wait of an answer; nothing of it is believed). A failure is a {@link SidecarException}.
     */
    public void wake(String body) throws SidecarException {
        call("POST", "/agent/wake", body, deadlineMs());
    }

    /** A client of the same sidecar, with the same settings, on a connection of its own. */
    public SidecarClient another() {
        return new SidecarClient(url, token, connectTimeoutMs, readTimeoutMs, tls);
    }

    public String url() {
        return base;
    }

    /** The longest any call takes before it fails: connect.timeout.ms + read.timeout.ms. */
    public long deadlineMs() {
        return (long) connectTimeoutMs + readTimeoutMs;
    }

    private static SidecarException malformed(String call, Throwable t) {
        return new SidecarException(call + " answered 200 with what the agent cannot read (" + brief(t) + ")", 200,
                -1, true, true);
    }

    private String call(String method, String path, String body, long deadlineMs) throws SidecarException {
        if (plain != null) {
            return callPlain(method, path, body, deadlineMs);
        }
        AtomicBoolean expired = new AtomicBoolean();
        ScheduledFuture<?> watchdog = null;
        try {
            // Streams are read to the end and closed, so the JDK keeps the connection for the next call.
            HttpURLConnection c = (HttpURLConnection) new URL(base + path).openConnection(Proxy.NO_PROXY);
            if (tls != null && c instanceof HttpsURLConnection) {
                ((HttpsURLConnection) c).setSSLSocketFactory(tls.socketFactory());
            }
            watchdog = WATCHDOG.schedule(() -> {
                expired.set(true);
                c.disconnect();
            }, deadlineMs, TimeUnit.MILLISECONDS);
            c.setConnectTimeout((int) Math.min(connectTimeoutMs, deadlineMs));
            c.setReadTimeout((int) Math.min(readTimeoutMs, deadlineMs));
            c.setUseCaches(false);
            c.setRequestMethod(method);
            c.setRequestProperty("Accept", "application/json");
            String bearer = token.current();
            if (bearer != null) {
                c.setRequestProperty("Authorization", "Bearer " + bearer);
            }
            if (body != null) {
                byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
                c.setDoOutput(true);
                c.setRequestProperty("Content-Type", "application/json");
                c.setFixedLengthStreamingMode(bytes.length);
                try (OutputStream out = c.getOutputStream()) {
                    out.write(bytes);
                }
            }
            int status = c.getResponseCode();
            String answer = read(status >= 400 ? c.getErrorStream() : c.getInputStream());
            if (expired.get()) {
                throw new IOException("no whole answer within " + deadlineMs + " ms");
            }
            return ok(method, path, status, answer, c.getHeaderField("Retry-After"));
        } catch (SidecarException e) {
            throw e;
        } catch (ConnectException | NoRouteToHostException | UnknownHostException e) {
            throw neverReached(method, path, e);
        } catch (SSLHandshakeException e) {
            // No request was served: the sidecar refused this agent's certificate, or this agent its certificate.
            throw new SidecarException(method + " " + path + " failed: the TLS handshake failed (the sidecar's "
                    + "certificate and tls.ca.file, or this agent's tls.cert.file and the sidecar's "
                    + "sidecar.rest.tls.ca.file): " + e.getMessage(), 0, -1, false);
        } catch (Throwable t) {
            throw mayHaveReached(method, path, t, expired.get(), deadlineMs);
        } finally {
            if (watchdog != null) {
                watchdog.cancel(false);
            }
        }
    }

    /** {@link #call} to an http:// sidecar: the same answers and failures, over {@link PlainHttp}. */
    private String callPlain(String method, String path, String body, long deadlineMs) throws SidecarException {
        AtomicBoolean expired = new AtomicBoolean();
        ScheduledFuture<?> watchdog = null;
        long start = System.nanoTime();
        try {
            PlainHttp.Connection c = plain.open((int) Math.min(connectTimeoutMs, deadlineMs));
            long left = deadlineMs - (System.nanoTime() - start) / 1_000_000;
            watchdog = WATCHDOG.schedule(() -> {
                expired.set(true);
                c.close();
            }, Math.max(0, left), TimeUnit.MILLISECONDS);
            PlainHttp.Answer a = plain.exchange(c, method, path, token.current(),
                    body == null ? null : body.getBytes(StandardCharsets.UTF_8), (int) Math.min(readTimeoutMs, deadlineMs),
                    MAX_ANSWER_BYTES);
            String answer = new String(a.body, StandardCharsets.UTF_8);
            if (expired.get()) {
                throw new IOException("no whole answer within " + deadlineMs + " ms");
            }
            return ok(method, path, a.status, answer, a.retryAfter);
        } catch (SidecarException e) {
            throw e;
        } catch (ConnectException | NoRouteToHostException | UnknownHostException e) {
            throw neverReached(method, path, e);
        } catch (Throwable t) {
            throw mayHaveReached(method, path, t, expired.get(), deadlineMs);
        } finally {
            if (watchdog != null) {
                watchdog.cancel(false);
            }
        }
    }

    /** The answer's body if its status is 200; otherwise the sidecar took the request and refused it. */
    private static String ok(String method, String path, int status, String answer, String retryAfter)
            throws SidecarException {
        if (status != 200) {
            throw new SidecarException(method + " " + path + " answered " + status + oneLine(answer), status,
                    retryAfterMs(retryAfter), true);
        }
        return answer;
    }

    /** A call that surely never reached the sidecar (no connection made). */
    private static SidecarException neverReached(String method, String path, IOException e) {
        return new SidecarException(method + " " + path + " failed: " + e, 0, -1, false);
    }

    /** A call that failed after its request may have reached the sidecar (any other failure, the deadline's too). */
    private static SidecarException mayHaveReached(String method, String path, Throwable t, boolean expired,
                                                   long deadlineMs) {
        String why = expired ? "no whole answer within " + deadlineMs + " ms" : brief(t);
        return new SidecarException(method + " " + path + " failed: " + why, 0, -1, true);
    }

    private static String read(InputStream in) throws IOException {
        if (in == null) {
            return "";
        }
        try (InputStream input = in) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buffer = new byte[8192];
            int n;
            while ((n = input.read(buffer)) > 0) {
                out.write(buffer, 0, n);
                if (out.size() > MAX_ANSWER_BYTES) {
                    throw new IOException("answer larger than " + MAX_ANSWER_BYTES + " bytes");
                }
            }
            return new String(out.toByteArray(), StandardCharsets.UTF_8);
        }
    }

    /** A throwable in one short line: its class and message, never its stack. */
    private static String brief(Throwable t) {
        String message = t.getMessage();
        String line = t.getClass().getName() + (message == null ? "" : ": " + message);
        return line.length() > 300 ? line.substring(0, 300) + "..." : line;
    }

    private static String oneLine(String answer) {
        String oneLine = answer.replaceAll("\\s+", " ").trim();
        if (oneLine.isEmpty()) {
            return "";
        }
        return ": " + (oneLine.length() > 200 ? oneLine.substring(0, 200) + "..." : oneLine);
    }

    private static long retryAfterMs(String header) {
        if (header == null) {
            return -1;
        }
        try {
            return (long) (Double.parseDouble(header.trim()) * 1000);
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
