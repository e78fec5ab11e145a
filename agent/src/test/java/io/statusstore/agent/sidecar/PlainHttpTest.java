package io.statusstore.agent.sidecar;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The agent's HTTP/1.1 client for an http:// sidecar against a server on a plain socket, answering as scripted. */
class PlainHttpTest {
    /** A server that reads each request whole and answers with what {@code answer} gives for it. */
    private static final class Server implements AutoCloseable {
        final ServerSocket socket = new ServerSocket(0);
        final AtomicInteger connections = new AtomicInteger();
        final List<String> requests = Collections.synchronizedList(new ArrayList<>());
        final Function<String, String> answer;
        final List<Socket> open = Collections.synchronizedList(new ArrayList<>());

        Server(Function<String, String> answer) throws IOException {
            this.answer = answer;
            Thread t = new Thread(this::accept, "plain-http-server");
            t.setDaemon(true);
            t.start();
        }

        URL url() throws IOException {
            return new URL("http://127.0.0.1:" + socket.getLocalPort() + "/");
        }

        private void accept() {
            while (!socket.isClosed()) {
                try {
                    Socket s = socket.accept();
                    connections.incrementAndGet();
                    open.add(s);
                    Thread t = new Thread(() -> serve(s), "plain-http-connection");
                    t.setDaemon(true);
                    t.start();
                } catch (IOException e) {
                    return;
                }
            }
        }

        private void serve(Socket s) {
            try (Socket c = s) {
                InputStream in = c.getInputStream();
                OutputStream out = c.getOutputStream();
                while (true) {
                    String head = readHead(in);
                    if (head == null) {
                        return;
                    }
                    int length = 0;
                    for (String line : head.split("\r\n")) {
                        if (line.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
                            length = Integer.parseInt(line.substring(15).trim());
                        }
                    }
                    byte[] body = new byte[length];
                    for (int at = 0; at < length; ) {
                        int n = in.read(body, at, length - at);
                        if (n < 0) {
                            return;
                        }
                        at += n;
                    }
                    String request = head + new String(body, StandardCharsets.UTF_8);
                    requests.add(request);
                    String reply = answer.apply(request);
                    if (reply == null) {
                        return;
                    }
                    out.write(reply.getBytes(StandardCharsets.UTF_8));
                    out.flush();
                    if (reply.contains("Connection: close")) {
                        return;
                    }
                }
            } catch (IOException e) {
                // The client went.
            }
        }

        private static String readHead(InputStream in) throws IOException {
            ByteArrayOutputStream head = new ByteArrayOutputStream();
            while (true) {
                int b = in.read();
                if (b < 0) {
                    return null;
                }
                head.write(b);
                String text = head.toString("ISO-8859-1");
                if (text.endsWith("\r\n\r\n")) {
                    return text;
                }
            }
        }

        @Override
        public void close() throws IOException {
            socket.close();
            synchronized (open) {
                for (Socket s : open) {
                    s.close();
                }
            }
        }
    }

    private static String ok(String body) {
        return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body;
    }

    private static String post(PlainHttp http, String body) throws IOException {
        PlainHttp.Answer a = http.exchange(http.open(500), "POST", "/agent/statuses", "t0k",
                body.getBytes(StandardCharsets.UTF_8), 2_000, 1 << 20);
        return a.status + " " + new String(a.body, StandardCharsets.UTF_8);
    }

    @Test
    void requestsGoWholeOnOneKeptConnection() throws Exception {
        try (Server server = new Server(request -> ok("{\"n\":" + request.length() + "}"))) {
            PlainHttp http = new PlainHttp(server.url());
            for (int i = 0; i < 5; i++) {
                assertTrue(post(http, "{\"i\":" + i + ",\"é\":1}").startsWith("200 {\"n\":"));
            }
            assertEquals(1, server.connections.get(), "connections opened");
            String first = server.requests.get(0);
            assertTrue(first.startsWith("POST /agent/statuses HTTP/1.1\r\n"), first);
            assertTrue(first.contains("\r\nAuthorization: Bearer t0k\r\n"), first);
            assertTrue(first.contains("\r\nContent-Type: application/json\r\n"), first);
            assertTrue(first.endsWith("\r\n\r\n{\"i\":0,\"é\":1}"), first);
        }
    }

    @Test
    void aKeptConnectionTheSidecarClosedIsNotUsed() throws Exception {
        // Had the request gone on it, it would have failed after its bytes may have left: a failed request, fenced.
        AtomicInteger served = new AtomicInteger();
        try (Server server = new Server(request -> served.incrementAndGet() == 1
                ? ok("{}").replace("\r\n\r\n", "\r\nConnection: keep-alive\r\n\r\n") : ok("{\"again\":1}"))) {
            PlainHttp http = new PlainHttp(server.url());
            assertEquals("200 {}", post(http, "{}"));
            synchronized (server.open) {
                server.open.get(0).close();
            }
            Thread.sleep(50);
            assertEquals("200 {\"again\":1}", post(http, "{}"));
            assertEquals(2, server.connections.get(), "connections opened");
        }
    }

    @Test
    void chunkedAndClosingAnswersAreReadWhole() throws Exception {
        AtomicInteger served = new AtomicInteger();
        try (Server server = new Server(request -> {
            switch (served.incrementAndGet()) {
                case 1: return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n5;x=y\r\n\":12}\r\n0\r\n\r\n";
                case 2: return "HTTP/1.1 503 Busy\r\nRetry-After: 1.5\r\nConnection: close\r\n\r\n{\"busy\":1}";
                default: return ok("{\"third\":1}");
            }
        })) {
            PlainHttp http = new PlainHttp(server.url());
            assertEquals("200 {\"a\":12}", post(http, "{}"));
            PlainHttp.Answer busy = http.exchange(http.open(500), "GET", "/ready", null, null, 2_000, 1 << 20);
            assertEquals(503, busy.status);
            assertEquals("1.5", busy.retryAfter);
            assertEquals("{\"busy\":1}", new String(busy.body, StandardCharsets.UTF_8));
            assertEquals("200 {\"third\":1}", post(http, "{}"));
            assertEquals(2, server.connections.get(), "a new connection after the one the sidecar closed");
            assertTrue(server.requests.get(1).startsWith("GET /ready HTTP/1.1\r\n"), server.requests.get(1));
        }
    }

    @Test
    void bytesPastAnAnswerLeaveItsConnectionUnused() throws Exception {
        AtomicInteger served = new AtomicInteger();
        try (Server server = new Server(request -> served.incrementAndGet() == 1 ? ok("{}") + "HTTP/1.1 200 OK\r\n"
                : ok("{\"second\":1}"))) {
            PlainHttp http = new PlainHttp(server.url());
            assertEquals("200 {}", post(http, "{}"));
            Thread.sleep(50);
            assertEquals("200 {\"second\":1}", post(http, "{}"));
            assertEquals(2, server.connections.get(), "connections opened");
        }
    }

    @Test
    void anAnswerCutShortOrTooLargeFails() throws Exception {
        try (Server server = new Server(request -> request.contains("short")
                ? "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n{}"
                : ok("{\"x\":\"" + new String(new char[100]).replace('\0', 'x') + "\"}"))) {
            PlainHttp http = new PlainHttp(server.url());
            assertThrows(IOException.class, () -> post(http, "short"));
            assertThrows(IOException.class, () -> http.exchange(http.open(500), "POST", "/agent/statuses", null,
                    new byte[0], 2_000, 50));
        }
    }
}
