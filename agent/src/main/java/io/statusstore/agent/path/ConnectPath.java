package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

/** Connect's own status path: the store's original methods, and whether anything of it is still in flight. */
public interface ConnectPath {
    /** Writes one status through the store's original method (put, putSafe or deleteTopic). */
    void write(StatusUpdate update);

    /**
     * Whether Connect's own path is quiet: no original write running, no record in its producer without an
     * outcome, and no re-send waiting on its retry executor. Once quiet it stays so until the next original write.
     */
    boolean quiet(long timeoutMs);
}
