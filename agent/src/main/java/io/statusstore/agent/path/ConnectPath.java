package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;

import java.util.Collection;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;

/** Connect's own status path: the store's original methods, and whether anything of it is still in flight. */
public interface ConnectPath {
    /**
     * Writes one status the agent held through the store's original method (put, putSafe or deleteTopic), unless the
     * worker's store has read another worker's status of its key with a higher generation: returns whether it did.
     */
    boolean write(StatusUpdate update);

    /**
     * Whether Connect's own path is quiet: no original write running, no record in its producer without an
     * outcome, and no re-send waiting on its retry executor. Once quiet it stays so until the next original write.
     */
    boolean quiet(long timeoutMs);

    /**
     * Whether the worker's own producer can write to the status topic's partitions that hold {@code keys} (rule 5):
     * a write that harms nothing goes to each of them through it, and the answer is true once every one was
     * acknowledged, false as soon as one failed. Never blocks the caller; the caller bounds the wait.
     */
    CompletableFuture<Boolean> canWrite(Collection<String> keys);

    /**
     * Writes {@code value} (null: a tombstone) as the record of {@code key} through the worker's own producer, exactly,
     * past Connect's rules: a held status landed right over it unseen ({@link LateWrites}). Never blocks the caller;
     * a failed attempt is made again while {@code wanted} says so.
     */
    void rewrite(String key, byte[] value, BooleanSupplier wanted);
}
