package io.statusstore.agent.sidecar;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** The sidecar's 200 answer to {@code POST /agent/statuses}: its instance, how it took each item, outcomes. */
public final class AgentAnswer {
    public final String instance;
    public final List<Item> accepted;
    public final List<Item> outcomes;
    /**
     * The pending writes whose last attempt waited out the sidecar's write bound without Kafka's answer ({@code
     * timed_out}, absent when none): rule 5's evidence, said as soon as the sidecar has it.
     */
    public final List<Long> timedOut;

    AgentAnswer(String instance, List<Item> accepted, List<Item> outcomes, List<Long> timedOut) {
        this.instance = instance;
        this.accepted = accepted;
        this.outcomes = outcomes;
        this.timedOut = timedOut;
    }

    /**
     * One item of {@code accepted} (seq, result, reason; key and attempts too when the update was settled before)
     * or of {@code outcomes} (seq, key, result, attempts, reason).
     */
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

    /** Results an update may have in {@code accepted}; an outcome's are the last four. */
    private static final Set<String> ACCEPTED = new HashSet<>(Arrays.asList(
            "pending", "dropped", "refused", "written", "superseded", "failed", "expired"));
    private static final Set<String> OUTCOMES = new HashSet<>(Arrays.asList("written", "superseded", "failed", "expired"));

    /** The answer in {@code json}; an {@link IllegalArgumentException} says what is not of its shape. */
    static AgentAnswer from(Object json) {
        if (!(json instanceof Map)) {
            throw new IllegalArgumentException("the answer is not a JSON object");
        }
        Map<?, ?> map = (Map<?, ?>) json;
        Object instance = map.get("instance");
        if (!(instance instanceof String) || ((String) instance).isEmpty()) {
            throw new IllegalArgumentException("the answer names no instance");
        }
        return new AgentAnswer((String) instance, items(map.get("accepted"), ACCEPTED, "accepted"),
                items(map.get("outcomes"), OUTCOMES, "outcomes"), seqs(map.get("timed_out"), "timed_out"));
    }

    /** An optional list of seqs (absent: none). */
    private static List<Long> seqs(Object list, String name) {
        if (list == null) {
            return Collections.emptyList();
        }
        if (!(list instanceof List)) {
            throw new IllegalArgumentException(name + " is not a list");
        }
        List<Long> seqs = new ArrayList<>();
        for (Object seq : (List<?>) list) {
            if (!(seq instanceof Long) || (Long) seq < 1) {
                throw new IllegalArgumentException("an item of " + name + " is not a seq");
            }
            seqs.add((Long) seq);
        }
        return seqs;
    }

    private static List<Item> items(Object list, Set<String> results, String name) {
        if (!(list instanceof List)) {
            throw new IllegalArgumentException(name + " is not a list");
        }
        boolean outcomes = results == OUTCOMES;
        List<Item> items = new ArrayList<>();
        for (Object o : (List<?>) list) {
            if (!(o instanceof Map)) {
                throw new IllegalArgumentException("an item of " + name + " is not an object");
            }
            Map<?, ?> m = (Map<?, ?>) o;
            Object seq = m.get("seq");
            Object result = m.get("result");
            Object key = m.get("key");
            Object attempts = m.get("attempts");
            Object reason = m.get("reason");
            if (!(seq instanceof Long) || (Long) seq < 1) {
                throw new IllegalArgumentException("an item of " + name + " has no seq");
            }
            if (!results.contains(result)) {
                throw new IllegalArgumentException("item " + seq + " of " + name + " has no result the agent knows: "
                        + result);
            }
            if ((outcomes && !(key instanceof String)) || (key != null && !(key instanceof String))) {
                throw new IllegalArgumentException("item " + seq + " of " + name + " has no key");
            }
            if ((attempts != null && !(attempts instanceof Long)) || (reason != null && !(reason instanceof String))) {
                throw new IllegalArgumentException("item " + seq + " of " + name + " has attempts or a reason of "
                        + "another type");
            }
            items.add(new Item((Long) seq, (String) key, (String) result, attempts == null ? 0 : (Long) attempts,
                    (String) reason));
        }
        return items;
    }
}
