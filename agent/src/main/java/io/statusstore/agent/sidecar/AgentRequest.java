package io.statusstore.agent.sidecar;

import io.statusstore.agent.json.JsonOut;
import io.statusstore.agent.status.StatusUpdate;

import java.util.List;

/** The body of {@code POST /agent/statuses}: the agent's session, its acknowledgement and lease, the updates. */
public final class AgentRequest {
    private AgentRequest() {
    }

    /**
     * Encodes one request.
     *
     * @param instance  the sidecar instance the agent hands its writes to: another one takes none of them (409)
     * @param ack       the highest outcome seq the agent has taken in with nothing unsettled below it
     * @param leaseMs   how long after this request the sidecar may still start writing this session's items
     * @param sentAtMs  the agent's wall clock when sending (the lease runs from here, see PROTOCOL.md)
     * @param last      the agent stops: the sidecar owns every pending item of this session, lease or not
     * @param waitMs    the answer may wait this long for every pending item of the session to be settled (0: not)
     */
    public static String encode(String agentId, String workerId, String instance, long ack, long leaseMs,
                                long sentAtMs, boolean last, long waitMs, List<StatusUpdate> updates) {
        JsonOut w = new JsonOut().beginObject()
                .name("agent").value(agentId)
                .name("worker_id").value(workerId)
                .name("instance").value(instance)
                .name("ack").value(ack)
                .name("lease_ms").value(leaseMs)
                .name("sent_at_ms").value(sentAtMs);
        if (last) {
            w.name("final").value(true);
        }
        if (waitMs > 0) {
            w.name("wait_ms").value(waitMs);
        }
        w.name("updates").beginArray();
        for (StatusUpdate u : updates) {
            encode(w, u);
        }
        return w.endArray().endObject().toString();
    }

    /**
     * The body of {@code POST /agent/wake}: the agent took the write {@code seq} while a request of its session was on
     * its way, and holds it for the next request.
     */
    public static String encodeWake(String agentId, String instance, long seq) {
        return new JsonOut().beginObject()
                .name("agent").value(agentId)
                .name("instance").value(instance)
                .name("seq").value(seq)
                .endObject().toString();
    }

    /** One update, with the fields its kind carries in the protocol. */
    public static void encode(JsonOut w, StatusUpdate u) {
        w.beginObject().name("seq").value(u.seq).name("kind").value(u.kind.wire).name("connector").value(u.connector);
        switch (u.kind) {
            case TASK:
            case CONNECTOR:
                if (u.kind == StatusUpdate.Kind.TASK) {
                    w.name("task").value(u.task);
                }
                w.name("state").value(u.state)
                        .name("trace").value(u.trace)
                        .name("worker_id").value(u.workerId)
                        .name("generation").value(u.generation);
                if (u.hasVersion) {
                    w.name("version").value(u.version);
                }
                w.name("safe").value(u.safe);
                break;
            case TOPIC:
                w.name("topic").value(u.topic).name("task").value(u.task)
                        .name("discoverTimestamp").value(u.discoverTimestamp);
                break;
            case DELETE_TOPIC:
                w.name("topic").value(u.topic);
                break;
            default:
                throw new IllegalStateException(u.kind.toString());
        }
        w.endObject();
    }
}
