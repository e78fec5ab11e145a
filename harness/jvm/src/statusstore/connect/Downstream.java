package statusstore.connect;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.Map;
import org.apache.kafka.connect.errors.ConnectException;

/** The system a scripted sink writes to ({@code scripted.downstream=host:port}): reached by a real TCP connection. */
final class Downstream {
    private static final int CONNECT_TIMEOUT_MS = 1000;

    private final String host;
    private final int port;

    private Downstream(String host, int port) {
        this.host = host;
        this.port = port;
    }

    /** The downstream the configuration names, or null. */
    static Downstream of(Map<String, String> config) {
        String address = config.get("scripted.downstream");
        if (address == null) {
            return null;
        }
        int colon = address.lastIndexOf(':');
        return new Downstream(address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)));
    }

    /** Opens a connection and closes it; a ConnectException, caused by the JDK's, when none is accepted. */
    void reach() {
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(host, port), CONNECT_TIMEOUT_MS);
        } catch (IOException e) {
            throw new ConnectException("cannot write to the downstream system at " + host + ":" + port, e);
        }
    }
}
