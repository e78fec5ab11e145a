package io.statusstore.agent.path;

import io.statusstore.agent.sidecar.AgentAnswer;
import io.statusstore.agent.status.StatusUpdate;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** Whether an answer fits what the agent asked (rule 1): pure, over the request and the seqs sent so far. */
final class AnswerCheck {
    private AnswerCheck() {
    }

    /**
     * What in {@code answer} does not fit: an {@code accepted} item naming a seq {@code batch} did not carry (or twice,
     * or leaving one out, or with another key), an outcome above {@code acked} naming a seq never sent or a key other
     * than its seq's ({@code sentKeys}: the key of every seq sent above the acknowledgement). Null when all fits.
     */
    static String inconsistency(List<StatusUpdate> batch, AgentAnswer answer, Map<Long, String> sentKeys, long acked) {
        Map<Long, String> carried = new HashMap<>();
        for (StatusUpdate u : batch) {
            carried.put(u.seq, u.key);
        }
        Set<Long> answered = new HashSet<>();
        for (AgentAnswer.Item item : answer.accepted) {
            String key = carried.get(item.seq);
            if (key == null || !answered.add(item.seq)) {
                return "accepted names seq " + item.seq + ", which the request did not carry (or names it twice)";
            }
            if (item.key != null && !item.key.equals(key)) {
                return "accepted names key " + item.key + " for seq " + item.seq + " of " + key;
            }
        }
        if (answered.size() != carried.size()) {
            return "accepted answers " + answered.size() + " of the request's " + carried.size() + " updates";
        }
        for (AgentAnswer.Item outcome : answer.outcomes) {
            if (outcome.seq <= acked) {
                continue;
            }
            String key = sentKeys.get(outcome.seq);
            if (key == null) {
                return "an outcome names seq " + outcome.seq + ", which the agent never sent";
            }
            if (!key.equals(outcome.key)) {
                return "an outcome names key " + outcome.key + " for seq " + outcome.seq + " of " + key;
            }
        }
        return null;
    }
}
