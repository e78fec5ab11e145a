package io.statusstore.agent.sidecar;

import io.statusstore.agent.json.JsonReader;

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

import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLHandshakeException;

/**
 * The agent's two calls to the sidecar, over {@link HttpURLConnection} with connect and read timeouts, so a
 * sidecar that is gone or late costs the (single) sender thread a bounded time and never a worker thread.
 */
public final class SidecarClient {
    private static final int MAX_ANSWER_BYTES = 16 << 20;

    private final String base;
    private final String token;
    private final int connectTimeoutMs;
    private final int readTimeoutMs;
    private final SidecarTls tls;

    public SidecarClient(URL url, String token, int connectTimeoutMs, int readTimeoutMs) {
        this(url, token, connectTimeoutMs, readTimeoutMs, null);
    }

    /** {@code tls}: an https:// sidecar's CA and this agent's certificate (null: the JVM's defaults). */
    public SidecarClient(URL url, String token, int connectTimeoutMs, int readTimeoutMs, SidecarTls tls) {
        String text = url.toString();
        this.base = text.endsWith("/") ? text.substring(0, text.length() - 1) : text;
        this.token = token;
        this.connectTimeoutMs = connectTimeoutMs;
        this.readTimeoutMs = readTimeoutMs;
        this.tls = tls;
    }

    /** {@code GET /}: which cluster and status topic the sidecar serves. */
    public SidecarIdentity identify() throws SidecarException {
        return SidecarIdentity.from(parse(call("GET", "/", null)));
    }

    /** {@code POST /agent/statuses} with an {@link AgentRequest} body. */
    public AgentAnswer post(String body) throws SidecarException {
        return AgentAnswer.from(parse(call("POST", "/agent/statuses", body)));
    }

    public String url() {
        return base;
    }

    private static Object parse(String text) throws SidecarException {
        try {
            return JsonReader.parse(text);
        } catch (IllegalArgumentException e) {
            throw new SidecarException("answered malformed JSON (" + e.getMessage() + ")", 200, -1, true);
        }
    }

    private String call(String method, String path, String body) throws SidecarException {
        try {
            // Streams are read to the end and closed, so the JDK keeps the connection for the next call.
            HttpURLConnection c = (HttpURLConnection) new URL(base + path).openConnection(Proxy.NO_PROXY);
            if (tls != null && c instanceof HttpsURLConnection) {
                ((HttpsURLConnection) c).setSSLSocketFactory(tls.socketFactory());
            }
            c.setConnectTimeout(connectTimeoutMs);
            c.setReadTimeout(readTimeoutMs);
            c.setUseCaches(false);
            c.setRequestMethod(method);
            c.setRequestProperty("Accept", "application/json");
            if (token != null) {
                c.setRequestProperty("Authorization", "Bearer " + token);
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
            if (status != 200) {
                throw new SidecarException(method + " " + path + " answered " + status + brief(answer), status,
                        retryAfterMs(c.getHeaderField("Retry-After")), true);
            }
            return answer;
        } catch (ConnectException | NoRouteToHostException | UnknownHostException e) {
            throw new SidecarException(method + " " + path + " failed: " + e, 0, -1, false);
        } catch (SSLHandshakeException e) {
            // No request was served: the sidecar refused this agent's certificate, or this agent its certificate.
            throw new SidecarException(method + " " + path + " failed: the TLS handshake failed (the sidecar's "
                    + "certificate and tls.ca.file, or this agent's tls.cert.file and the sidecar's "
                    + "sidecar.rest.tls.ca.file): " + e.getMessage(), 0, -1, false);
        } catch (IOException | RuntimeException e) {
            throw new SidecarException(method + " " + path + " failed: " + e, 0, -1, true);
        }
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

    private static String brief(String answer) {
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
