package io.statusstore.agent.path;

import io.statusstore.agent.Daemons;
import io.statusstore.agent.sidecar.AgentRequest;
import io.statusstore.agent.sidecar.SidecarClient;
import io.statusstore.agent.sidecar.SidecarException;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.LongConsumer;

/**
 * Waking an answer that waits for outcomes (PROTOCOL.md, {@code POST /agent/wake}). A request that carries writes asks
 * its answer to wait until Kafka acknowledged them ({@link Sender#OUTCOME_WAIT_MS}), and a write the worker hands over
 * meanwhile (a resumed connector's task, a moment after the connector) waits for that answer: a round trip to Kafka
 * more than a stock worker's record, which its producer sends in its next batch. So the agent says, on a connection of
 * its own, that it holds such a write, and the sidecar answers the waiting request at once: the write goes in the next
 * request. At most one wake per request, sent from one thread, never from a worker's. Nothing of a wake's answer is
 * believed: a wake that fails costs only the wait it would have cut, and a sidecar that does not know the route (one of
 * an older version: 404) is not woken again.
 */
final class Wakes {
    private static final ExecutorService THREAD =
            Executors.newSingleThreadExecutor(Daemons.named("status-store-agent-wake"));

    private final SidecarClient client;
    private final String agentId;
    /** The sidecar instance that answered a wake 404, or null. */
    private volatile String unknownAt;

    Wakes(SidecarClient client, String agentId) {
        this.client = client.another();
        this.agentId = agentId;
    }

    /** What the router calls with the seq of the first write taken while a request to {@code instance} waits. */
    LongConsumer forRequest(String instance) {
        if (instance == null || instance.equals(unknownAt)) {
            return null;
        }
        return seq -> THREAD.execute(() -> send(instance, seq));
    }

    private void send(String instance, long seq) {
        try {
            client.wake(AgentRequest.encodeWake(agentId, instance, seq));
        } catch (SidecarException e) {
            if (e.status == 404 || e.status == 405) {
                unknownAt = instance;
            }
        } catch (RuntimeException e) {
            // Nothing to do: the answer it meant comes when its wait ends.
        }
    }
}
