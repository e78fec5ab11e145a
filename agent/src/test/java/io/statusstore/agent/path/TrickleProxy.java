package io.statusstore.agent.path;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * A raw HTTP proxy in front of a {@link FakeSidecar} that, while {@link #trickling}, hands each answer to
 * {@code POST /agent/statuses} back a byte at a time, {@link #byteMs} apart, head included: every read of the
 * agent gets a byte well within its read timeout, and the whole answer takes far longer than any request may.
 * One request per connection; {@link #to} points the connections from then on at another sidecar (two instances
 * behind one URL, as a load balancer in front of an old pod still terminating and its successor hands them out).
 */
final class TrickleProxy implements AutoCloseable {
    private volatile int upstreamPort;
    private final ServerSocket server;
    volatile boolean trickling;
    volatile long byteMs = 100;

    TrickleProxy(int upstreamPort) throws IOException {
        this.upstreamPort = upstreamPort;
        this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread accept = new Thread(this::accept, "trickle-proxy");
        accept.setDaemon(true);
        accept.start();
    }

    /** The connections made from now on go to the sidecar on {@code port}. */
    void to(int port) {
        upstreamPort = port;
    }

    String url() {
        return "http://127.0.0.1:" + server.getLocalPort();
    }

    private void accept() {
        while (!server.isClosed()) {
            try {
                Socket client = server.accept();
                Thread serve = new Thread(() -> serve(client), "trickle-proxy-connection");
                serve.setDaemon(true);
                serve.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket client) {
        try (Socket c = client; Socket upstream = new Socket(InetAddress.getLoopbackAddress(), upstreamPort)) {
            String head = readHead(c.getInputStream());
            int length = 0;
            StringBuilder forward = new StringBuilder();
            for (String line : head.split("\r\n")) {
                String lower = line.toLowerCase(Locale.ROOT);
                if (lower.startsWith("content-length:")) {
                    length = Integer.parseInt(line.substring(line.indexOf(':') + 1).trim());
                }
                if (!lower.startsWith("connection:") && !line.isEmpty()) {
                    forward.append(line).append("\r\n");
                }
            }
            forward.append("Connection: close\r\n\r\n");
            byte[] body = readExactly(c.getInputStream(), length);
            OutputStream up = upstream.getOutputStream();
            up.write(forward.toString().getBytes(StandardCharsets.ISO_8859_1));
            up.write(body);
            up.flush();
            byte[] answer = readAll(upstream.getInputStream());
            OutputStream out = c.getOutputStream();
            if (trickling && head.startsWith("POST /agent/statuses")) {
                for (byte b : answer) {
                    out.write(b);
                    out.flush();
                    Thread.sleep(byteMs);
                }
            } else {
                out.write(answer);
                out.flush();
            }
        } catch (IOException | InterruptedException | RuntimeException e) {
            // The agent gave up on the answer, or the sidecar is gone: the connection ends.
        }
    }

    private static String readHead(InputStream in) throws IOException {
        ByteArrayOutputStream head = new ByteArrayOutputStream();
        int matched = 0;
        while (matched < 4) {
            int b = in.read();
            if (b < 0) {
                throw new IOException("the request ended in its head");
            }
            head.write(b);
            matched = (b == '\r' && (matched == 0 || matched == 2)) || (b == '\n' && (matched == 1 || matched == 3))
                    ? matched + 1 : 0;
        }
        return new String(head.toByteArray(), StandardCharsets.ISO_8859_1);
    }

    private static byte[] readExactly(InputStream in, int length) throws IOException {
        byte[] bytes = new byte[length];
        int read = 0;
        while (read < length) {
            int n = in.read(bytes, read, length - read);
            if (n < 0) {
                throw new IOException("the request ended in its body");
            }
            read += n;
        }
        return bytes;
    }

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buffer = new byte[8192];
        int n;
        while ((n = in.read(buffer)) > 0) {
            out.write(buffer, 0, n);
        }
        return out.toByteArray();
    }

    @Override
    public void close() throws IOException {
        server.close();
    }
}
