package statusstore.connect;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A connector whose {@code taskConfigs()} or {@code validate()} does not return ({@code scripted.block}), as a
 * connector that waits on a system that hangs does: the worker's herder thread calls {@code taskConfigs()}, so the
 * worker stays in its group and heartbeats while it can do nothing else (KIP-1017's {@code GET /health} says so).
 * Each connector blocks the first time only, in each worker, and for {@code scripted.block.ms} at most.
 */
final class Blocking {
    // The connectors that blocked already in this worker, by "<name>/<where>".
    private static final Set<String> BLOCKED = ConcurrentHashMap.newKeySet();

    private Blocking() {
    }

    /** Blocks when the connector's configuration asks for it at {@code where} ("task-configs" or "validate"). */
    static void maybeBlock(Map<String, String> config, String where) {
        if (config == null || !where.equals(config.get("scripted.block"))
                || !BLOCKED.add(config.get("name") + "/" + where)) {
            return;
        }
        long until = System.currentTimeMillis() + Long.parseLong(config.getOrDefault("scripted.block.ms", "60000"));
        boolean interrupted = false;
        long left;
        while ((left = until - System.currentTimeMillis()) > 0) {
            try {
                Thread.sleep(left);
            } catch (InterruptedException e) {
                // As a connector that ignores interruption: the herder cannot get its thread back early.
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
