package io.statusstore.agent.sidecar;

import io.statusstore.agent.json.JsonOut;
import io.statusstore.agent.json.JsonTree;
import io.statusstore.agent.status.StatusUpdate;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

/** The updates' fields, as PROTOCOL.md lists them, carry what Connect's status records hold (key status-connector-<name>, status-task-<name>-<n>,
 * status-topic-<topic>:connector-<name>; value state, trace, worker_id, generation). */
class AgentRequestTest {
    private static String encode(StatusUpdate u) {
        JsonOut w = new JsonOut();
        AgentRequest.encode(w, u);
        return w.toString();
    }

    @Test
    void aConnectorStatusOfConnect3HasNoVersion() {
        // Connect's record: status-connector-conn -> {"state":"RUNNING","trace":null,"worker_id":"localhost:8083","generation":0}
        StatusUpdate u = StatusUpdate.connector("conn", "RUNNING", null, "localhost:8083", 0, false, null, false, null)
                .withSeq(3);
        assertEquals("status-connector-conn", u.key);
        assertEquals("{\"seq\":3,\"kind\":\"connector\",\"connector\":\"conn\",\"state\":\"RUNNING\",\"trace\":null,"
                + "\"worker_id\":\"localhost:8083\",\"generation\":0,\"safe\":false}", encode(u));
    }

    @Test
    void aTaskStatusOfConnect4CarriesItsVersionAndTrace() {
        // Connect's record: status-task-my-conn-12 -> {"state":"FAILED","trace":"java.lang.RuntimeException: boom\n\tat ...
        String trace = "java.lang.RuntimeException: boom\n\tat Foo.bar(Foo.java:1)\n";
        StatusUpdate u = StatusUpdate.task("my-conn", 12, "FAILED", trace, "10.0.0.7:8083", 7, true, "1.0", true, null)
                .withSeq(17);
        assertEquals("status-task-my-conn-12", u.key);
        assertEquals("{\"seq\":17,\"kind\":\"task\",\"connector\":\"my-conn\",\"task\":12,\"state\":\"FAILED\","
                + "\"trace\":\"java.lang.RuntimeException: boom\\n\\tat Foo.bar(Foo.java:1)\\n\","
                + "\"worker_id\":\"10.0.0.7:8083\",\"generation\":7,\"version\":\"1.0\",\"safe\":true}", encode(u));
        StatusUpdate unknownVersion = StatusUpdate.task("c", 0, "RUNNING", null, "w", 1, true, null, false, null);
        assertEquals(null, ((Map<?, ?>) JsonTree.parse(encode(unknownVersion))).get("version"));
        assertEquals(true, ((Map<?, ?>) JsonTree.parse(encode(unknownVersion))).containsKey("version"));
    }

    @Test
    void destroyedIsSentAsItsStateATombstoneOfThatKey() {
        StatusUpdate u = StatusUpdate.connector("c", "DESTROYED", null, "w:1", 3, true, null, false, null).withSeq(18);
        Map<?, ?> json = (Map<?, ?>) JsonTree.parse(encode(u));
        assertEquals("DESTROYED", json.get("state"));
        assertEquals("status-connector-c", u.key);
    }

    @Test
    void aTopicStatusAndItsDeletion() {
        // Connect's record: status-topic-foo-topic:connector-foo-source ->
        //   {"topic":{"name":"foo-topic","connector":"foo-source","task":0,"discoverTimestamp":1700000000000}}
        StatusUpdate topic = StatusUpdate.topic("foo-source", "foo-topic", 0, 1700000000000L, null).withSeq(19);
        assertEquals("status-topic-foo-topic:connector-foo-source", topic.key);
        assertEquals("{\"seq\":19,\"kind\":\"topic\",\"connector\":\"foo-source\",\"topic\":\"foo-topic\",\"task\":0,"
                + "\"discoverTimestamp\":1700000000000}", encode(topic));
        StatusUpdate delete = StatusUpdate.deleteTopic("foo-source", "foo-topic").withSeq(20);
        assertEquals(topic.key, delete.key);
        assertEquals("{\"seq\":20,\"kind\":\"delete_topic\",\"connector\":\"foo-source\",\"topic\":\"foo-topic\"}",
                encode(delete));
    }

    @Test
    void theRequestCarriesSessionAckLeaseAndUpdatesInOrder() {
        List<StatusUpdate> updates = Arrays.asList(
                StatusUpdate.connector("a", "RUNNING", null, "w", 1, false, null, false, null).withSeq(5),
                StatusUpdate.deleteTopic("a", "t").withSeq(6));
        Map<?, ?> json = (Map<?, ?>) JsonTree.parse(AgentRequest.encode("agent-1", "w", "i-1", 4, 10000, 123, false, 0, updates));
        assertEquals("agent-1", json.get("agent"));
        assertEquals("w", json.get("worker_id"));
        assertEquals("i-1", json.get("instance"));
        assertEquals(4L, json.get("ack"));
        assertEquals(10000L, json.get("lease_ms"));
        assertEquals(123L, json.get("sent_at_ms"));
        assertFalse(json.containsKey("final"));
        List<?> sent = (List<?>) json.get("updates");
        assertEquals(5L, ((Map<?, ?>) sent.get(0)).get("seq"));
        assertEquals(6L, ((Map<?, ?>) sent.get(1)).get("seq"));
        Map<?, ?> last = (Map<?, ?>) JsonTree.parse(AgentRequest.encode("a", null, "i-1", 0, 1, 2, true, 300,
                Collections.<StatusUpdate>emptyList()));
        assertEquals(true, last.get("final"));
        assertFalse(json.containsKey("wait_ms"));
        assertEquals(300L, last.get("wait_ms"));
        assertEquals(Collections.emptyList(), last.get("updates"));
    }

    @Test
    void readsAnAnswerAndRefusesAMalformedOne() {
        AgentAnswer a = AgentAnswer.from(JsonTree.parse("{\"instance\":\"i\",\"accepted\":[{\"seq\":17,\"result\":"
                + "\"pending\"},{\"seq\":19,\"result\":\"refused\",\"error_code\":413,\"reason\":\"too large\"}],"
                + "\"outcomes\":[{\"seq\":12,\"key\":\"status-task-c-0\",\"result\":\"written\",\"attempts\":3}]}"));
        assertEquals("i", a.instance);
        assertEquals(2, a.accepted.size());
        assertEquals("too large", a.accepted.get(1).reason);
        assertEquals(3, a.outcomes.get(0).attempts);
        assertEquals("status-task-c-0", a.outcomes.get(0).key);
        for (String bad : new String[] {"[]", "{}", "{\"instance\":\"i\",\"accepted\":{}}",
                "{\"instance\":\"i\",\"outcomes\":[{\"seq\":1,\"result\":\"written\"}]}"}) {
            org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> AgentAnswer.from(JsonTree.parse(bad)), bad);
        }
    }
}
