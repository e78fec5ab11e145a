package io.statusstore.agent.sidecar;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URL;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicReference;

/**
 * HTTP/1.1 over one kept connection to an http:// sidecar, for the agent's calls: each request (its headers and body)
 * is written in one go with TCP_NODELAY, and a kept connection is checked for the sidecar's close without waiting.
 *
 * <p>Timed on Connect 4.4.0's worker, {@link java.net.HttpURLConnection} spent 2.9 ms at p50 (7 ms at p90, load 8)
 * before a POST's first byte went: on a kept connection it reads with a 1 ms timeout to learn whether the server closed
 * it (a fixed-length POST is never sent again, so it checks first), then writes the headers and the body apart. This
 * client learns the same from one non-blocking read. It never sends a request again: a request that failed after its
 * bytes may have left is the caller's failure ({@link SidecarClient}), as before.
 */
final class PlainHttp {
    /** A kept connection idle longer than this is closed, not used: the sidecar closes one idle for 5 s. */
    static final long IDLE_MS = 2_000;
    /** The longest line of an answer's head read, and the most lines outside its body (chunks' sizes included). */
    static final int MAX_LINE_BYTES = 16 << 10;
    static final int MAX_HEAD_LINES = 100_000;

    /** One answer: its status, its Retry-After header (or null), its body. */
    static final class Answer {
        final int status;
        final String retryAfter;
        final byte[] body;

        Answer(int status, String retryAfter, byte[] body) {
            this.status = status;
            this.retryAfter = retryAfter;
            this.body = body;
        }
    }

    /** An open connection, and when its last exchange ended. */
    static final class Connection {
        final SocketChannel channel;
        final InputStream in;
        long idleSince;

        Connection(SocketChannel channel) throws IOException {
            this.channel = channel;
            this.in = channel.socket().getInputStream();
        }

        void close() {
            try {
                channel.close();
            } catch (IOException e) {
                // Closed either way.
            }
        }
    }

    private final InetSocketAddress address;
    private final String hostHeader;
    private final String basePath;
    private final AtomicReference<Connection> kept = new AtomicReference<>();

    PlainHttp(URL base) {
        int port = base.getPort() < 0 ? base.getDefaultPort() : base.getPort();
        this.address = InetSocketAddress.createUnresolved(base.getHost(), port);
        this.hostHeader = base.getHost().indexOf(':') >= 0 ? "[" + base.getHost() + "]:" + port : base.getHost() + ":" + port;
        String path = base.getPath();
        this.basePath = path.endsWith("/") ? path.substring(0, path.length() - 1) : path;
    }

    /**
     * A kept connection still open, or a new one (connected within {@code connectTimeoutMs}). Whoever takes it owns it
     * until {@link #keep} or {@link Connection#close}.
     */
    Connection open(int connectTimeoutMs) throws IOException {
        Connection c = kept.getAndSet(null);
        if (c != null && usable(c)) {
            return c;
        }
        if (c != null) {
            c.close();
        }
        SocketChannel channel = SocketChannel.open();
        try {
            Socket socket = channel.socket();
            socket.setTcpNoDelay(true);
            InetSocketAddress resolved = new InetSocketAddress(address.getHostString(), address.getPort());
            if (resolved.isUnresolved()) {
                throw new UnknownHostException(address.getHostString());
            }
            socket.connect(resolved, connectTimeoutMs);
            return new Connection(channel);
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
    }

    /**
     * Writes one request and reads its answer on {@code c} (whose reads time out after {@code readTimeoutMs}, and which
     * another thread may close to end the call); at most {@code maxBody} bytes of body are read. On any failure the
     * connection is closed. Kept for the next call when the answer allows it.
     */
    Answer exchange(Connection c, String method, String path, String bearer, byte[] body, int readTimeoutMs,
                    int maxBody) throws IOException {
        boolean reusable = false;
        try {
            c.channel.socket().setSoTimeout(readTimeoutMs);
            StringBuilder head = new StringBuilder(256).append(method).append(' ').append(basePath).append(path)
                    .append(" HTTP/1.1\r\nHost: ").append(hostHeader).append("\r\nAccept: application/json\r\n");
            if (bearer != null) {
                head.append("Authorization: Bearer ").append(bearer).append("\r\n");
            }
            if (body != null) {
                head.append("Content-Type: application/json\r\nContent-Length: ").append(body.length).append("\r\n");
            }
            byte[] headBytes = head.append("\r\n").toString().getBytes(StandardCharsets.ISO_8859_1);
            ByteBuffer out = ByteBuffer.allocate(headBytes.length + (body == null ? 0 : body.length));
            out.put(headBytes);
            if (body != null) {
                out.put(body);
            }
            out.flip();
            while (out.hasRemaining()) {
                c.channel.write(out);
            }
            Reader reader = new Reader(c.in);
            int status;
            String retryAfter = null;
            long length = -1;
            boolean chunked = false;
            boolean close;
            do {
                String statusLine = reader.line();
                if (!statusLine.startsWith("HTTP/1.")) {
                    throw new IOException("not an HTTP answer: " + brief(statusLine));
                }
                String[] parts = statusLine.split(" ", 3);
                if (parts.length < 2) {
                    throw new IOException("not an HTTP status line: " + brief(statusLine));
                }
                status = Integer.parseInt(parts[1].trim());
                close = statusLine.startsWith("HTTP/1.0");
                for (String line = reader.line(); !line.isEmpty(); line = reader.line()) {
                    int colon = line.indexOf(':');
                    if (colon <= 0) {
                        throw new IOException("not an HTTP header: " + brief(line));
                    }
                    String name = line.substring(0, colon).trim().toLowerCase(Locale.ROOT);
                    String value = line.substring(colon + 1).trim();
                    if (name.equals("content-length")) {
                        long given = Long.parseLong(value);
                        if (given < 0 || (length >= 0 && given != length)) {
                            throw new IOException("a wrong Content-Length: " + brief(value));
                        }
                        length = given;
                    } else if (name.equals("transfer-encoding")) {
                        chunked = value.toLowerCase(Locale.ROOT).endsWith("chunked");
                    } else if (name.equals("connection")) {
                        String v = value.toLowerCase(Locale.ROOT);
                        close = v.contains("close") || (close && !v.contains("keep-alive"));
                    } else if (name.equals("retry-after")) {
                        retryAfter = value;
                    }
                }
            } while (status >= 100 && status < 200);
            byte[] answer;
            if (method.equals("HEAD") || status == 204 || status == 304) {
                answer = new byte[0];
            } else if (chunked) {
                answer = reader.chunked(maxBody);
            } else if (length >= 0) {
                if (length > maxBody) {
                    throw new IOException("answer larger than " + maxBody + " bytes");
                }
                answer = reader.exactly((int) length);
            } else {
                answer = reader.toEnd(maxBody);
                close = true;
            }
            // Bytes past the answer: no request asked for them, the connection is not used again.
            reusable = !close && reader.drained();
            return new Answer(status, retryAfter, answer);
        } finally {
            if (reusable) {
                keep(c);
            } else {
                c.close();
            }
        }
    }

    /** Drops the kept connection, if any. */
    void close() {
        Connection c = kept.getAndSet(null);
        if (c != null) {
            c.close();
        }
    }

    private void keep(Connection c) {
        c.idleSince = System.nanoTime();
        Connection before = kept.getAndSet(c);
        if (before != null) {
            before.close();
        }
    }

    /** Whether a kept connection may carry a request: not idle too long, and not closed (nor written to) by the peer. */
    private static boolean usable(Connection c) {
        if (System.nanoTime() - c.idleSince > IDLE_MS * 1_000_000) {
            return false;
        }
        try {
            c.channel.configureBlocking(false);
            try {
                // -1: the sidecar closed it; a byte: it sent what no request asked for. Either way not used.
                return c.channel.read(ByteBuffer.allocate(1)) == 0;
            } finally {
                c.channel.configureBlocking(true);
            }
        } catch (IOException e) {
            return false;
        }
    }

    private static String brief(String text) {
        return text.length() > 100 ? text.substring(0, 100) + "..." : text;
    }

    /** Reads an answer's head and body from the connection's stream, buffered. */
    private static final class Reader {
        private final InputStream in;
        private final byte[] buffer = new byte[8192];
        private int position;
        private int limit;
        private int headLines;

        Reader(InputStream in) {
            this.in = in;
        }

        private boolean fill() throws IOException {
            int n = in.read(buffer, 0, buffer.length);
            if (n <= 0) {
                return false;
            }
            position = 0;
            limit = n;
            return true;
        }

        private int next() throws IOException {
            if (position == limit && !fill()) {
                throw new EOFException("the connection closed before the whole answer");
            }
            return buffer[position++] & 0xff;
        }

        boolean drained() {
            return position == limit;
        }

        /** One line of the head (or a chunk's size), without its CRLF (ISO-8859-1). */
        String line() throws IOException {
            if (++headLines > MAX_HEAD_LINES) {
                throw new IOException("an answer of more than " + MAX_HEAD_LINES + " lines outside its body");
            }
            StringBuilder line = new StringBuilder();
            while (true) {
                int b = next();
                if (line.length() >= MAX_LINE_BYTES) {
                    throw new IOException("a line of an answer's head longer than " + MAX_LINE_BYTES + " bytes");
                }
                if (b == '\n') {
                    int end = line.length();
                    return end > 0 && line.charAt(end - 1) == '\r' ? line.substring(0, end - 1) : line.toString();
                }
                line.append((char) b);
            }
        }

        byte[] exactly(int length) throws IOException {
            byte[] out = new byte[length];
            int at = 0;
            while (at < length) {
                if (position == limit && !fill()) {
                    throw new EOFException("the connection closed " + (length - at) + " bytes before the answer's end");
                }
                int n = Math.min(length - at, limit - position);
                System.arraycopy(buffer, position, out, at, n);
                position += n;
                at += n;
            }
            return out;
        }

        byte[] chunked(int maxBody) throws IOException {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            while (true) {
                String size = line();
                int semicolon = size.indexOf(';');
                long n = Long.parseLong((semicolon >= 0 ? size.substring(0, semicolon) : size).trim(), 16);
                if (n < 0 || out.size() + n > maxBody) {
                    throw new IOException("answer larger than " + maxBody + " bytes");
                }
                if (n == 0) {
                    while (!line().isEmpty()) {
                        // Trailers: none used.
                    }
                    return out.toByteArray();
                }
                out.write(exactly((int) n));
                if (!line().isEmpty()) {
                    throw new IOException("a chunk not ended by CRLF");
                }
            }
        }

        byte[] toEnd(int maxBody) throws IOException {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            while (true) {
                if (position == limit && !fill()) {
                    return out.toByteArray();
                }
                out.write(buffer, position, limit - position);
                position = limit;
                if (out.size() > maxBody) {
                    throw new IOException("answer larger than " + maxBody + " bytes");
                }
            }
        }
    }
}
