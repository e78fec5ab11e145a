package io.statusstore.agent.sidecar;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/** The sidecar's 200 answer to {@code POST /agent/statuses}: its instance, how it took each item, outcomes. */
public final class AgentAnswer {
    public final String instance;
    public final List<Item> accepted;
    public final List<Item> outcomes;

    AgentAnswer(String instance, List<Item> accepted, List<Item> outcomes) {
        this.instance = instance;
        this.accepted = accepted;
        this.outcomes = outcomes;
    }

    /** One item of {@code accepted} (seq, result, reason) or of {@code outcomes} (also key and attempts). */
    public static final class Item {
        public final long seq;
        public final String key;
        public final String result;
        public final long attempts;
        public final String reason;

        public Item(long seq, String key, String result, long attempts, String reason) {
            this.seq = seq;
            this.key = key;
            this.result = result;
            this.attempts = attempts;
            this.reason = reason;
        }
    }

    static AgentAnswer from(Object json) {
        if (!(json instanceof Map)) {
            throw new IllegalArgumentException("the answer is not a JSON object");
        }
        Map<?, ?> map = (Map<?, ?>) json;
        Object instance = map.get("instance");
        if (!(instance instanceof String)) {
            throw new IllegalArgumentException("the answer names no instance");
        }
        return new AgentAnswer((String) instance, items(map.get("accepted"), false), items(map.get("outcomes"), true));
    }

    private static List<Item> items(Object list, boolean outcomes) {
        if (list == null) {
            return Collections.emptyList();
        }
        if (!(list instanceof List)) {
            throw new IllegalArgumentException("accepted/outcomes is not a list");
        }
        List<Item> items = new ArrayList<>();
        for (Object o : (List<?>) list) {
            if (!(o instanceof Map)) {
                throw new IllegalArgumentException("an item is not an object");
            }
            Map<?, ?> m = (Map<?, ?>) o;
            Object seq = m.get("seq");
            Object result = m.get("result");
            Object key = m.get("key");
            if (!(seq instanceof Long) || !(result instanceof String) || (outcomes && !(key instanceof String))) {
                throw new IllegalArgumentException("an item lacks seq, result" + (outcomes ? " or key" : ""));
            }
            Object attempts = m.get("attempts");
            Object reason = m.get("reason");
            items.add(new Item((Long) seq, key instanceof String ? (String) key : null, (String) result,
                    attempts instanceof Long ? (Long) attempts : 0, reason instanceof String ? (String) reason : null));
        }
        return items;
    }
}
