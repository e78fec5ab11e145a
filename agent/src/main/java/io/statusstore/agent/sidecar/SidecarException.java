package io.statusstore.agent.sidecar;

/** The sidecar did not take a request: unreachable, late, or answering other than 200. */
public final class SidecarException extends Exception {
    private static final long serialVersionUID = 1L;

    /** The HTTP status, or 0 when no answer came. */
    public final int status;
    /** The sidecar's Retry-After in milliseconds, or -1. */
    public final long retryAfterMs;
    /** False when the request surely never reached the sidecar (no connection was made). */
    public final boolean reached;

    public SidecarException(String message, int status, long retryAfterMs, boolean reached) {
        super(message);
        this.status = status;
        this.retryAfterMs = retryAfterMs;
        this.reached = reached;
    }
}
