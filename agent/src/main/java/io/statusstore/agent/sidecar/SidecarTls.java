package io.statusstore.agent.sidecar;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;

/**
 * The agent's TLS to a sidecar served over HTTPS: the CA it trusts ({@code tls.ca.file}, PEM; else the JVM's own
 * trust store) and the client certificate it presents to a sidecar asking for mutual TLS ({@code tls.cert.file},
 * the certificate and its chain, and {@code tls.key.file}, its key: PEM, PKCS#8 as cert-manager writes it with
 * {@code privateKey.encoding: PKCS8}).
 *
 * <p>The files are read at start ({@link #read}: a file that cannot be used is the agent's one line, and the worker
 * stays on Connect's own store) and again when they change (looked at most once every {@link #CHECK_INTERVAL_MS},
 * when a connection is made), so a renewed certificate is presented without restarting the worker; a change that
 * cannot be used keeps what was read before.
 */
public final class SidecarTls {
    static final long CHECK_INTERVAL_MS = 10_000;
    private static final Pattern PEM = Pattern.compile(
            "-----BEGIN ([A-Z ]+)-----([A-Za-z0-9+/=\\s]+)-----END \\1-----");
    private static final String[] KEY_ALGORITHMS = {"EC", "RSA", "DSA"};
    // The in-memory keystore's password: it never leaves this object.
    private static final char[] NO_PASSWORD = new char[0];

    private final Path ca;
    private final Path cert;
    private final Path key;
    private volatile SSLSocketFactory factory;
    private volatile long stamp;
    private volatile long checkedAt;

    private SidecarTls(Path ca, Path cert, Path key) {
        this.ca = ca;
        this.cert = cert;
        this.key = key;
    }

    /**
     * The TLS of these files (each may be null: no CA file trusts the JVM's CAs, no certificate presents none),
     * read now; an {@link IOException} whose message names the file and what is wrong.
     */
    public static SidecarTls read(String caFile, String certFile, String keyFile) throws IOException {
        if ((certFile == null) != (keyFile == null)) {
            throw new IOException("tls.cert.file and tls.key.file go together");
        }
        SidecarTls tls = new SidecarTls(path(caFile), path(certFile), path(keyFile));
        tls.stamp = tls.stamp();
        tls.factory = tls.build();
        tls.checkedAt = System.currentTimeMillis();
        return tls;
    }

    /** The socket factory of the files' current content (read again if they changed). */
    public SSLSocketFactory socketFactory() {
        long now = System.currentTimeMillis();
        if (now - checkedAt >= CHECK_INTERVAL_MS) {
            checkedAt = now;
            long current = stamp();
            if (current != stamp) {
                try {
                    factory = build();
                    stamp = current;
                } catch (IOException e) {
                    // Kept unread: looked at again at the next interval (a writer may be half-way through).
                }
            }
        }
        return factory;
    }

    /** One line for the log. */
    public String describe() {
        return "tls.ca.file=" + (ca == null ? "none (the JVM's CAs)" : ca.toString())
                + ", client certificate " + (cert == null ? "none" : cert.toString());
    }

    private static Path path(String file) throws IOException {
        if (file == null) {
            return null;
        }
        if (file.isEmpty()) {
            throw new IOException("an empty file name");
        }
        return Paths.get(file);
    }

    private long stamp() {
        long stamp = 17;
        for (Path file : new Path[] {ca, cert, key}) {
            if (file != null) {
                try {
                    stamp = stamp * 31 + Files.getLastModifiedTime(file).toMillis();
                    stamp = stamp * 31 + Files.size(file);
                } catch (IOException e) {
                    stamp = stamp * 31 - 1;
                }
            }
        }
        return stamp;
    }

    private SSLSocketFactory build() throws IOException {
        try {
            TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            if (ca == null) {
                trust.init((KeyStore) null);
            } else {
                KeyStore store = emptyStore();
                int n = 0;
                for (Certificate certificate : certificates(ca, "tls.ca.file")) {
                    store.setCertificateEntry("ca-" + n++, certificate);
                }
                trust.init(store);
            }
            KeyManagerFactory keys = null;
            if (cert != null) {
                KeyStore store = emptyStore();
                PrivateKey privateKey = privateKey(key);
                List<Certificate> chain = certificates(cert, "tls.cert.file");
                store.setKeyEntry("client", privateKey, NO_PASSWORD, chain.toArray(new Certificate[0]));
                keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
                keys.init(store, NO_PASSWORD);
            }
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(keys == null ? null : keys.getKeyManagers(), trust.getTrustManagers(), null);
            return context.getSocketFactory();
        } catch (GeneralSecurityException e) {
            throw new IOException("the TLS files cannot be used (" + e + ")", e);
        }
    }

    private static KeyStore emptyStore() throws GeneralSecurityException, IOException {
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        return store;
    }

    private static List<Certificate> certificates(Path file, String option) throws IOException {
        List<Certificate> found = new ArrayList<>();
        try (InputStream in = new ByteArrayInputStream(pemBlocks(file, option, "CERTIFICATE"))) {
            Collection<? extends Certificate> read = CertificateFactory.getInstance("X.509").generateCertificates(in);
            found.addAll(read);
        } catch (GeneralSecurityException e) {
            throw new IOException(option + " '" + file + "' holds a certificate that cannot be read (" + e + ")", e);
        }
        if (found.isEmpty()) {
            throw new IOException(option + " '" + file + "' holds no PEM certificate");
        }
        return found;
    }

    /** The file's PEM blocks of this type, as PEM text (other blocks, such as a key beside them, left out). */
    private static byte[] pemBlocks(Path file, String option, String type) throws IOException {
        StringBuilder kept = new StringBuilder();
        Matcher m = PEM.matcher(read(file, option));
        while (m.find()) {
            if (m.group(1).equals(type)) {
                kept.append(m.group()).append('\n');
            }
        }
        return kept.toString().getBytes(StandardCharsets.US_ASCII);
    }

    private static PrivateKey privateKey(Path file) throws IOException {
        Matcher m = PEM.matcher(read(file, "tls.key.file"));
        while (m.find()) {
            String type = m.group(1);
            if (type.equals("PRIVATE KEY")) {
                byte[] der = Base64.getMimeDecoder().decode(m.group(2));
                for (String algorithm : KEY_ALGORITHMS) {
                    try {
                        return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
                    } catch (GeneralSecurityException e) {
                        // Not this algorithm's key: the next one.
                    }
                }
                throw new IOException("tls.key.file '" + file + "' holds a key of no algorithm this JVM reads");
            }
            if (type.endsWith("PRIVATE KEY")) {
                throw new IOException("tls.key.file '" + file + "' holds a '" + type + "' (PKCS#1, SEC1 or encrypted):"
                        + " give an unencrypted PKCS#8 key ('BEGIN PRIVATE KEY': openssl pkcs8 -topk8 -nocrypt, or"
                        + " cert-manager's privateKey.encoding: PKCS8)");
            }
        }
        throw new IOException("tls.key.file '" + file + "' holds no PEM private key");
    }

    private static String read(Path file, String option) throws IOException {
        try {
            return new String(Files.readAllBytes(file), StandardCharsets.US_ASCII);
        } catch (IOException | RuntimeException e) {
            throw new IOException(option + " '" + file + "' cannot be read (" + e + ")", e);
        }
    }
}
