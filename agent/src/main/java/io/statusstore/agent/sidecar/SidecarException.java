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

    /**
     * True when the sidecar answered 200 with what the agent cannot believe: not of the protocol's shape, or not
     * fitting what the agent asked (PROTOCOL.md, rule 1). Such an instance is not given statuses again.
     */
    public final boolean malformed;

    public SidecarException(String message, int status, long retryAfterMs, boolean reached) {
        this(message, status, retryAfterMs, reached, false);
    }

    public SidecarException(String message, int status, long retryAfterMs, boolean reached, boolean malformed) {
        super(message);
        this.status = status;
        this.retryAfterMs = retryAfterMs;
        this.reached = reached;
        this.malformed = malformed;
    }
}
