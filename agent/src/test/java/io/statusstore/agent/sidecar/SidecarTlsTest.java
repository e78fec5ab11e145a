package io.statusstore.agent.sidecar;

import io.statusstore.agent.AgentOptions;

import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsParameters;
import com.sun.net.httpserver.HttpsServer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.FileInputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.KeyStore;
import java.util.Base64;
import java.util.Collections;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.TrustManagerFactory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The agent's TLS: each file that cannot be used is one message naming the option and the file; against a real
 * HTTPS server (the JDK's, certificates made by the JDK's keytool) the agent's client trusts only its CA file and
 * presents its certificate to a server that requires one. Against the real sidecar: tests/test_secured_kafka_live.py.
 */
class SidecarTlsTest {
    private static final String PASSWORD = "test-secret";
    private static final String IDENTITY = "{\"kafka_cluster_id\":\"c\",\"status_topic\":\"t\",\"instance\":\"i\","
            + "\"agent_protocol\":1,\"write_bound_ms\":1000}";

    private static String error(String args) {
        return assertThrows(AgentOptions.OptionsException.class,
                () -> AgentOptions.parse(args, Collections.<String, String>emptyMap())).getMessage();
    }

    @Test
    void noTlsOptionsKeepTheJvmDefaults() throws Exception {
        assertNull(AgentOptions.parse("url=https://sidecar:8084", Collections.<String, String>emptyMap()).tls);
    }

    @Test
    void aMissingCaFileIsOneMessageNamingIt(@TempDir Path dir) {
        String message = error("url=https://127.0.0.1:8084,tls.ca.file=" + dir.resolve("absent.pem"));
        assertTrue(message.startsWith("tls.ca.file '" + dir.resolve("absent.pem") + "' cannot be read"), message);
    }

    @Test
    void aCaFileWithoutCertificatesIsRefused(@TempDir Path dir) throws Exception {
        Path ca = Files.write(dir.resolve("ca.pem"), "not a certificate\n".getBytes(StandardCharsets.US_ASCII));
        assertTrue(error("url=https://127.0.0.1:8084,tls.ca.file=" + ca).endsWith("holds no PEM certificate"));
    }

    @Test
    void tlsOptionsNeedAnHttpsUrl(@TempDir Path dir) {
        assertTrue(error("url=http://127.0.0.1:8084,tls.ca.file=" + dir.resolve("ca.pem"))
                .startsWith("tls.* options need an https:// url"));
    }

    @Test
    void aCertificateNeedsItsKey(@TempDir Path dir) {
        assertTrue(error("url=https://127.0.0.1:8084,tls.cert.file=" + dir.resolve("c.pem"))
                .equals("tls.cert.file and tls.key.file go together"));
    }

    @Test
    void aKeyInPkcs1IsExplained(@TempDir Path dir) throws Exception {
        Path cert = Files.write(dir.resolve("c.pem"), ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
                .getBytes(StandardCharsets.US_ASCII));
        Path key = Files.write(dir.resolve("k.pem"), ("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n")
                .getBytes(StandardCharsets.US_ASCII));
        String message = error("url=https://127.0.0.1:8084,tls.cert.file=" + cert + ",tls.key.file=" + key);
        assertTrue(message.startsWith("tls.key.file '" + key + "' holds a 'RSA PRIVATE KEY'"), message);
        assertTrue(message.contains("PKCS#8"), message);
    }

    @Test
    void theClientTrustsItsCaFileAndPresentsItsCertificate(@TempDir Path dir) throws Exception {
        Path server = keystore(dir, "server", "SAN=ip:127.0.0.1");
        Path client = keystore(dir, "agent", null);
        Path stranger = keystore(dir, "stranger", null);
        HttpsServer https = serve(server, client);
        try {
            URL url = new URL("https://127.0.0.1:" + https.getAddress().getPort());
            SidecarTls trusted = SidecarTls.read(pem(dir, server).toString(), pem(dir, client).toString(),
                    key(dir, client).toString());
            assertEquals("i", new SidecarClient(url, null, 5000, 5000, trusted).identify().instance);
            // A CA file that did not sign the server's certificate: one failure naming the TLS handshake.
            SidecarTls wrongCa = SidecarTls.read(pem(dir, stranger).toString(), pem(dir, client).toString(),
                    key(dir, client).toString());
            SidecarException refused = assertThrows(SidecarException.class,
                    () -> new SidecarClient(url, null, 5000, 5000, wrongCa).identify());
            assertTrue(refused.getMessage().contains("the TLS handshake failed"), refused.getMessage());
            assertFalse(refused.reached);
            // Without a certificate (the server requires one), the handshake fails too.
            SidecarTls noCertificate = SidecarTls.read(pem(dir, server).toString(), null, null);
            assertThrows(SidecarException.class, () -> new SidecarClient(url, null, 5000, 5000, noCertificate)
                    .identify());
        } finally {
            https.stop(0);
        }
    }

    /** A self-signed certificate and its key in a PKCS#12 store, made by the JDK's keytool. */
    private static Path keystore(Path dir, String name, String extension) throws Exception {
        Path store = dir.resolve(name + ".p12");
        String keytool = Paths.get(System.getProperty("java.home"), "bin", "keytool").toString();
        java.util.List<String> command = new java.util.ArrayList<>(java.util.Arrays.asList(keytool, "-genkeypair",
                "-keystore", store.toString(), "-storetype", "PKCS12", "-storepass", PASSWORD, "-alias", name,
                "-keyalg", "EC", "-dname", "CN=" + name, "-validity", "2"));
        if (extension != null) {
            command.add("-ext");
            command.add(extension);
        }
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        assertTrue(process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0, "keytool failed");
        return store;
    }

    private static KeyStore load(Path store) throws Exception {
        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = new FileInputStream(store.toFile())) {
            keys.load(in, PASSWORD.toCharArray());
        }
        return keys;
    }

    private static String alias(Path store) {
        String file = store.getFileName().toString();
        return file.substring(0, file.length() - ".p12".length());
    }

    private static Path pem(Path dir, Path store) throws Exception {
        byte[] der = load(store).getCertificate(alias(store)).getEncoded();
        return Files.write(dir.resolve(alias(store) + ".pem"), armored("CERTIFICATE", der));
    }

    private static Path key(Path dir, Path store) throws Exception {
        byte[] der = load(store).getKey(alias(store), PASSWORD.toCharArray()).getEncoded();
        return Files.write(dir.resolve(alias(store) + ".key"), armored("PRIVATE KEY", der));
    }

    private static byte[] armored(String type, byte[] der) {
        return ("-----BEGIN " + type + "-----\n" + Base64.getMimeEncoder().encodeToString(der) + "\n-----END " + type
                + "-----\n").getBytes(StandardCharsets.US_ASCII);
    }

    /** The JDK's HTTPS server with ``server``'s certificate, requiring a client certificate ``client`` signed. */
    private static HttpsServer serve(Path server, Path client) throws Exception {
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(load(server), PASSWORD.toCharArray());
        KeyStore trusted = KeyStore.getInstance("PKCS12");
        trusted.load(null, null);
        trusted.setCertificateEntry("client", load(client).getCertificate(alias(client)));
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(trusted);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(keys.getKeyManagers(), trust.getTrustManagers(), null);
        HttpsServer https = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        https.setHttpsConfigurator(new HttpsConfigurator(context) {
            @Override
            public void configure(HttpsParameters parameters) {
                // Through SSLParameters: the JDK's server applies setNeedClientAuth and then clears it with
                // setWantClientAuth(false).
                SSLParameters required = context.getDefaultSSLParameters();
                required.setNeedClientAuth(true);
                parameters.setSSLParameters(required);
            }
        });
        https.createContext("/", exchange -> {
            byte[] body = IDENTITY.getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "application/json");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        https.start();
        return https;
    }
}
