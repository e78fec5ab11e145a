package io.statusstore.agent.path;

import io.statusstore.agent.status.StatusUpdate;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * {@link KeyTable} keeps its keys in several orderings so that each step costs O(log n); here random sequences of
 * the sender's and the worker's operations run against it and against a model that scans every key for every
 * answer (the table's rules, stated the plain way), and every answer must be the same.
 */
class KeyTableModelTest {
    private static final String[] KEYS = {"a", "b", "c", "d", "e", "f"};
    private static final String[] STATES = {"RUNNING", "PAUSED", "FAILED", "UNASSIGNED"};

    /** One key's slots in the model, as {@link KeyEntry} documents them. */
    private static final class Slots {
        StatusUpdate unsent;
        StatusUpdate sending;
        StatusUpdate pending;
        StatusUpdate verifying;
        long pendingSince;
        /** A pending write given back: its write taken again counts its time pending from then (rule 5). */
        long givenBackSince = -1;
        long verifyUntil;
        long heldUntil;
        long fenceUntil;
        boolean leaving;
        boolean draining;
        final List<Long> replaced = new ArrayList<>();

        StatusUpdate newest() {
            return unsent != null ? unsent : sending != null ? sending : pending != null ? pending : verifying;
        }

        boolean empty() {
            return unsent == null && sending == null && pending == null && verifying == null && !draining;
        }

        @Override
        public String toString() {
            return "[unsent " + unsent + ", sending " + sending + ", pending " + pending + ", verifying " + verifying
                    + ", replaced " + replaced + (draining ? ", draining" : "") + "]";
        }

        boolean unconditional() {
            for (StatusUpdate u : new StatusUpdate[] {unsent, sending, pending, verifying}) {
                if (u != null && !u.safe) {
                    return true;
                }
            }
            return false;
        }
    }

    private final Map<String, Slots> model = new LinkedHashMap<>();
    private final KeyTable table = new KeyTable(4);
    private final ReadBack readBack = new ReadBack(100, 1_000_000);
    private Random random;
    private long seq;
    private long now;
    private boolean leaving;

    @Test
    void everyAnswerIsTheModelsOverRandomRuns() {
        for (long seed = 1; seed <= 40; seed++) {
            KeyTableModelTest run = new KeyTableModelTest();
            run.random = new Random(seed);
            for (int step = 0; step < 3_000; step++) {
                run.step(seed, step);
            }
        }
    }

    private void step(long seed, int step) {
        String where = "seed " + seed + ", step " + step + ", model " + model;
        now += random.nextInt(4);
        // Leaving, the sender only hands keys to Connect's path, and the worker's writes of keys in the table wait.
        switch (leaving ? (random.nextBoolean() ? 0 : 13) : random.nextInt(14)) {
            case 0: case 1: offer(where); break;
            case 2: takeBatch(where); break;
            case 3: onSending((s, u) -> { table.accepted(u, now); modelAccepted(s, u); }); break;
            case 4: onSending((s, u) -> { table.returned(u); s.sending = null; if (s.unsent == null) { s.unsent = u; } }); break;
            case 5: onSending((s, u) -> { table.settledOnArrival(u); s.sending = null; }); break;
            case 6: takeBack(where); break;
            case 7: onPending((s, u) -> { assertEquals(true, table.settle(u.key, u.seq), where); s.pending = null;
                    s.replaced.clear(); }); break;
            case 8: written(where); break;
            case 9: read(); break;
            case 10: replacedOutcome(); break;
            case 11: assertEquals(str(modelUnseen()), str(table.unseen(readBack, now)), where); break;
            case 12: if (!leaving && random.nextInt(10) == 0) { restart(where); } break;
            default: fenceOrDrain(where);
        }
        model.values().removeIf(s -> { if (s.empty()) { s.replaced.clear(); } return s.empty(); });
        compare(where);
    }

    private void offer(String where) {
        String key = KEYS[random.nextInt(KEYS.length)];
        StatusUpdate u = StatusUpdate.task(key, 0, STATES[random.nextInt(STATES.length)], null, "w:1", 1, false, null,
                random.nextBoolean(), null).withSeq(++seq);
        Slots s = model.get(u.key);
        boolean taken = s != null || (!leaving && model.size() < 4);
        assertEquals(taken, table.offer(u, !leaving), where);
        if (taken) {
            if (s == null) {
                s = new Slots();
                model.put(u.key, s);
            }
            s.unsent = u.safe && s.unconditional() ? u.unconditional() : u;
        }
    }

    private void takeBatch(String where) {
        int max = 1 + random.nextInt(3);
        List<Slots> ready = model.values().stream().filter(s -> s.unsent != null && s.sending == null
                && s.heldUntil <= now).sorted(Comparator.comparingLong(s -> s.unsent.seq)).collect(Collectors.toList());
        List<Long> expected = new ArrayList<>();
        for (Slots s : ready.subList(0, Math.min(max, ready.size()))) {
            expected.add(s.unsent.seq);
            s.sending = s.unsent;
            s.unsent = null;
        }
        assertEquals(expected, seqs(table.takeBatch(max, now)), where);
    }

    private void modelAccepted(Slots s, StatusUpdate u) {
        if (s.pending != null) {
            s.replaced.add(s.pending.seq);
        }
        s.sending = null;
        s.pending = u;
        s.pendingSince = s.givenBackSince >= 0 ? s.givenBackSince : now;
        s.givenBackSince = -1;
    }

    private void takeBack(String where) {
        List<StatusUpdate> there = new ArrayList<>();
        for (Slots s : model.values()) {
            if (s.sending != null) {
                there.add(s.sending);
            }
            if (s.pending != null) {
                there.add(s.pending);
            }
        }
        if (there.isEmpty()) {
            return;
        }
        StatusUpdate u = there.get(random.nextInt(there.size()));
        StatusUpdate again = u.withSeq(++seq);
        Slots s = model.get(u.key);
        assertEquals(true, table.takeBack(u, again), where);
        if (s.sending != null && s.sending.seq == u.seq) {
            s.sending = null;
        } else {
            s.pending = null;
            s.givenBackSince = s.givenBackSince >= 0 ? Math.min(s.givenBackSince, s.pendingSince) : s.pendingSince;
        }
        if (s.unsent == null && s.sending == null) {
            s.unsent = again;
        }
    }

    private void written(String where) {
        List<StatusUpdate> there = new ArrayList<>();
        for (Slots s : model.values()) {
            if (s.sending != null) {
                there.add(s.sending);
            }
            if (s.pending != null) {
                there.add(s.pending);
            }
        }
        if (there.isEmpty()) {
            return;
        }
        StatusUpdate u = there.get(random.nextInt(there.size()));
        if (random.nextBoolean()) {
            readBack.watch(u.key, now);
            readBack.read(u.key, value(u));
        }
        Slots s = model.get(u.key);
        long until = now + random.nextInt(20);
        assertEquals(true, table.written(u.key, u.seq, until, readBack, null), where);
        if (s.pending != null && s.pending.seq == u.seq) {
            s.pending = null;
            s.replaced.clear();
        } else {
            s.sending = null;
        }
        if (s.verifying == null || s.verifying.seq < u.seq) {
            s.verifying = readBack.seen(u) ? null : u;
            s.verifyUntil = until;
        }
    }

    /** The worker's store reads back a key's verifying write (or an older value of it, which settles nothing). */
    private void read() {
        List<Slots> verifying = model.values().stream().filter(s -> s.verifying != null).collect(Collectors.toList());
        if (verifying.isEmpty()) {
            return;
        }
        Slots s = verifying.get(random.nextInt(verifying.size()));
        StatusUpdate u = s.verifying;
        readBack.watch(u.key, now);
        readBack.read(u.key, random.nextBoolean() ? value(u) : null);
        table.readBack(u.key, readBack);
        if (readBack.seen(u)) {
            s.verifying = null;
        }
    }

    private void replacedOutcome() {
        for (Slots s : model.values()) {
            if (!s.replaced.isEmpty()) {
                Long seqOf = s.replaced.remove(0);
                assertEquals(true, table.awaits(seqOf));
                table.outcomeCame(seqOf);
                return;
            }
        }
    }

    private StatusUpdate modelUnseen() {
        List<Slots> late = model.values().stream().filter(s -> s.verifying != null && s.verifyUntil < now)
                .sorted(Comparator.<Slots>comparingLong(s -> s.verifyUntil).thenComparing(s -> s.verifying.key))
                .collect(Collectors.toList());
        for (Slots s : late) {
            if (!readBack.seen(s.verifying)) {
                return s.verifying;
            }
            s.verifying = null;
        }
        return null;
    }

    private void restart(String where) {
        long holdUntil = now + random.nextInt(30);
        List<Slots> wasPending = model.values().stream().filter(s -> s.pending != null)
                .sorted(Comparator.comparingLong(s -> s.pending.seq)).collect(Collectors.toList());
        model.values().forEach(s -> s.replaced.clear());
        long first = seq + 1;
        assertEquals(wasPending.size(), table.moves().resendPending(holdUntil, () -> ++seq), where);
        for (Slots s : wasPending) {
            if (s.unsent == null) {
                s.unsent = (s.sending != null ? s.sending : s.pending).withSeq(first++);
            }
            s.pending = null;
            s.heldUntil = Math.max(s.heldUntil, holdUntil);
        }
    }

    private void fenceOrDrain(String where) {
        if (!leaving) {
            if (random.nextInt(8) != 0) {
                return;
            }
            long fence = now + random.nextInt(40) - 10;
            int waiting = 0;
            for (Slots s : model.values()) {
                boolean there = s.sending != null || s.pending != null || s.verifying != null;
                s.leaving = true;
                s.fenceUntil = Math.max(there ? fence : Long.MIN_VALUE, s.heldUntil);
                waiting += there || s.heldUntil > 0 ? 1 : 0;
            }
            assertEquals(waiting, table.moves().fence(fence), where);
            leaving = true;
            return;
        }
        Slots draining = model.values().stream().filter(s -> s.draining).findFirst().orElse(null);
        if (draining != null && random.nextBoolean()) {
            String key = model.entrySet().stream().filter(e -> e.getValue() == draining).findFirst().get().getKey();
            table.moves().drained(StatusUpdate.task(key.substring("status-task-".length(), key.length() - 2), 0, "RUNNING",
                    null, "w:1", 1, false, null, false, null));
            draining.draining = false;
            return;
        }
        Slots ready = draining != null ? null : model.values().stream().filter(s -> s.leaving && !s.draining
                && s.newest() != null && s.fenceUntil <= now).min(Comparator.comparingLong(s -> s.newest().seq))
                .orElse(null);
        StatusUpdate expected = null;
        if (ready != null) {
            StatusUpdate newest = ready.newest();
            expected = newest.safe && ready.unconditional() ? newest.unconditional() : newest;
            ready.unsent = null;
            ready.sending = null;
            ready.pending = null;
            ready.verifying = null;
            ready.givenBackSince = -1;
            ready.replaced.clear();
            ready.draining = true;
        }
        if (draining == null) {
            assertEquals(str(expected), str(table.moves().takeReady(now)), where);
        }
        if (model.isEmpty() || model.values().stream().allMatch(Slots::empty)) {
            leaving = false;
        }
    }

    private void compare(String where) {
        assertEquals(model.size(), table.size(), where);
        long lowest = -1;
        for (Slots s : model.values()) {
            List<Long> awaited = new ArrayList<>(s.replaced);
            for (StatusUpdate u : new StatusUpdate[] {s.unsent, s.sending, s.pending}) {
                if (u != null) {
                    awaited.add(u.seq);
                }
            }
            for (long a : awaited) {
                lowest = lowest < 0 ? a : Math.min(lowest, a);
                assertEquals(true, table.awaits(a), where + ": awaits " + a);
            }
        }
        assertEquals(lowest, table.lowestUnsettledSeq(), where);
        assertEquals(model.values().stream().anyMatch(s -> s.unsent != null), table.hasUnsent(), where);
        assertEquals(model.values().stream().anyMatch(s -> s.pending != null), table.hasPending(), where);
        long since = now - 5;
        assertEquals(model.values().stream().filter(s -> s.pending != null && s.pendingSince <= since)
                .map(s -> s.pending.seq).sorted().collect(Collectors.toList()), seqs(table.pendingSince(since)), where);
        assertEquals(model.values().stream().filter(s -> s.verifying != null).mapToLong(s -> s.verifyUntil).min()
                .orElse(-1), table.nextVerifyDeadline(), where);
        assertEquals(model.values().stream().filter(s -> s.unsent != null && s.heldUntil > now)
                .mapToLong(s -> s.heldUntil).min().orElse(-1), table.moves().nextRelease(now), where);
        if (leaving) {
            assertEquals(model.values().stream().filter(s -> s.leaving && !s.draining && s.newest() != null
                    && s.fenceUntil > now).mapToLong(s -> s.fenceUntil).min().orElse(-1), table.moves().nextFence(now), where);
        }
    }

    private interface SlotAction {
        void run(Slots s, StatusUpdate u);
    }

    private void onSending(SlotAction action) {
        List<Slots> sending = model.values().stream().filter(s -> s.sending != null).collect(Collectors.toList());
        if (!sending.isEmpty()) {
            Slots s = sending.get(random.nextInt(sending.size()));
            action.run(s, s.sending);
        }
    }

    private void onPending(SlotAction action) {
        List<Slots> pending = model.values().stream().filter(s -> s.pending != null).collect(Collectors.toList());
        if (!pending.isEmpty()) {
            Slots s = pending.get(random.nextInt(pending.size()));
            action.run(s, s.pending);
        }
    }

    private static byte[] value(StatusUpdate u) {
        return ("{\"state\":\"" + u.state + "\",\"trace\":null,\"worker_id\":\"" + u.workerId + "\",\"generation\":"
                + u.generation + "}").getBytes(StandardCharsets.UTF_8);
    }

    private static String str(StatusUpdate u) {
        return u == null ? "null" : u + (u.safe ? "" : " put");
    }

    private static List<Long> seqs(List<StatusUpdate> updates) {
        return updates.stream().map(u -> u.seq).collect(Collectors.toList());
    }
}
