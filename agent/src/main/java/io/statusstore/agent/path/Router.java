package io.statusstore.agent.path;

import io.statusstore.agent.Warnings;
import io.statusstore.agent.jmx.AgentMetrics;
import io.statusstore.agent.sidecar.AgentAnswer;
import io.statusstore.agent.sidecar.SidecarException;
import io.statusstore.agent.status.StatusUpdate;

import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.function.LongConsumer;

/**
 * Which path each status write takes, and the table of writes not yet settled: the one lock worker threads
 * and the sender share. Worker threads only call {@link #offer}, which never waits on I/O.
 *
 * <pre>
 *   STARTING ---(the first probe answers)--+
 *      | (no answer within its bound)     |
 *      v                                  v
 *   CONNECT ---(the right sidecar answers)---> QUIESCING ---(Connect's own path quiet)---> SIDECAR
 *      ^                                           |                                        |
 *      |                       (not quiet in time, | stop, table full)    (known away, wrong |
 *      |                                           v                      sidecar, table full, stop)
 *      +-------------(table empty)------------- FENCING <---------------------------------+
 * </pre>
 * On CONNECT (and STOPPED, once the store stopped) the worker's own methods run. On STARTING, QUIESCING and SIDECAR
 * writes enter the table: a fresh store's first writes wait for the agent's first exchange with the sidecar, so that
 * they too go through it, but only until {@link #startingUntil}: then (or when that exchange fails) the path leaves
 * for the fence, where they have nothing at the sidecar and take Connect's path at once. On FENCING (leaving) a write of a key in the table waits there for the key's fence; any other
 * runs the original at once, which is safe because nothing of its key is at the sidecar; a write of a key not in
 * a full table starts the leaving, and runs the original at once for the same reason.
 */
public final class Router {
    /** The paths, as in the diagram above. */
    public enum Path { STARTING, CONNECT, QUIESCING, SIDECAR, FENCING, STOPPED }

    private final KeyTable table;
    private final AgentMetrics metrics;
    private final ReadBack readBack;
    /** The held statuses written through Connect's path, watched as they land (rule 3, for records still on their way). */
    private final LateWrites lateWrites = new LateWrites();
    private final Warnings undoWarnings = new Warnings();
    private final int maxKeys;
    private Path path = Path.STARTING;
    /** Until when (ms) writes on STARTING wait for the first exchange: set when the sender starts. */
    private long startingUntil = Long.MAX_VALUE;
    private long lastSeq;
    /** {@link #wakeOnWrite}. */
    private LongConsumer wakeOnWrite;
    private String workerId;
    private Leaving leaving;
    private boolean stopRequested;
    /** The sender's thread has ended: nothing moves the path back to the sidecar, and stop needs no one to wait for. */
    private boolean orphaned;
    private int flushWaiters;
    /** Signals given to the sender by other threads ({@link #signal}), and their count when it last looked. */
    private long signals;
    private long signalsSeen;
    private final Outcomes outcomes;
    /** Until when the sidecar may still write what it took of this session (see {@link #posting}). */
    private long sidecarFence = Long.MIN_VALUE;
    /** The key of the write {@link #takeReady} gave out that Connect's own path has not yet taken, or null. */
    private String handing;

    /** {@code readBack}: what the worker's own store reads back of the status topic (rule 4). */
    public Router(int maxKeys, AgentMetrics metrics, ReadBack readBack) {
        this.table = new KeyTable(maxKeys);
        this.maxKeys = maxKeys;
        this.metrics = metrics;
        this.readBack = readBack;
        this.outcomes = new Outcomes(table, metrics, readBack, () -> ++lastSeq);
        metrics.queuedKeys(this::size);
        readBack.onWatchedRead(this::readBackArrived);
        readBack.onTombstone(this::tombstoneRead);
        readBack.onEveryRead((key, value) -> lateWrites.read(key, value, System.nanoTime() / 1_000_000));
        lateWrites.onUndone((update, over) -> {
            metrics.undone();
            undoWarnings.warn("undone", "a status held past its fence and written through Connect (" + update
                    + ") landed right after " + over + " of its key that the worker's store had not read when it went "
                    + "out (another worker's agent handed its own over at the same moment): writing that record again, "
                    + "so that the older status does not stay over it");
        });
    }

    /** How a held status that landed over a record no check saw is undone: that record written again through Connect. */
    public void undoWith(ConnectPath connect) {
        lateWrites.rewriteWith(connect::rewrite);
    }

    /**
     * A worker thread's write: true when the agent took it (the original method must not run), false when
     * the original must run now.
     */
    public synchronized boolean offer(StatusUpdate update) {
        // A newer write of the key lands after a held one written late: that one needs no watch any more.
        lateWrites.end(update.key);
        if (update.workerId != null) {
            workerId = update.workerId;
        }
        if (path == Path.CONNECT || path == Path.STOPPED) {
            return false;
        }
        if (path == Path.STARTING && System.nanoTime() / 1_000_000 >= startingUntil) {
            leave(null);
        }
        boolean fencing = path == Path.FENCING;
        if (table.offer(update.withSeq(++lastSeq), !fencing)) {
            if (path != Path.QUIESCING && path != Path.STARTING) {
                signal();
            }
            if (wakeOnWrite != null && path == Path.SIDECAR) {
                LongConsumer wake = wakeOnWrite;
                wakeOnWrite = null;
                wake.accept(lastSeq);
            }
            return true;
        }
        if (!fencing) {
            leave(new Leaving(Leaving.Kind.TABLE_FULL, "the agent's table is full (max.keys=" + maxKeys + ")"));
        }
        return false;
    }

    /**
     * While a request whose answer waits for outcomes is on its way: what to call (once, at once, on the worker's
     * thread: it must not block) with the seq of the first write taken meanwhile, which waits for that answer
     * ({@link Wakes}); null otherwise.
     */
    synchronized void wakeOnWrite(LongConsumer wake) {
        wakeOnWrite = wake;
    }

    public synchronized Path path() {
        return path;
    }

    public synchronized String workerId() {
        return workerId;
    }

    public synchronized int size() {
        return table.size();
    }

    // ---- the sender's side -------------------------------------------------------------------------------

    /** Up to {@code max} unsent writes, oldest first, now sending (none unless on the sidecar path). */
    synchronized List<StatusUpdate> takeBatch(int max, long now) {
        if (path != Path.SIDECAR) {
            return Collections.emptyList();
        }
        List<StatusUpdate> batch = table.takeBatch(max, now);
        for (StatusUpdate u : batch) {
            outcomes.sent(u, now);
        }
        return batch;
    }

    /**
     * A request goes now: until {@code fence} the sidecar may write what it took of this session (its lease runs
     * from this request, and a write it starts within the lease lands within its write bound, or never).
     */
    synchronized long posting(long fence) {
        long before = sidecarFence;
        sidecarFence = Math.max(sidecarFence, fence);
        return before;
    }

    /**
     * The request {@link #posting} announced surely never reached the sidecar (refused at connect, or by another
     * instance): it renewed no lease, so the fence is again {@code before}, what {@link #posting} returned.
     */
    synchronized void notPosted(long before) {
        sidecarFence = before;
    }

    /**
     * The sidecar answered a request that ended the session's lease (sent at {@code fence}'s start): it starts no write
     * of the session after it, so nothing it took can land after {@code fence}, which may be sooner than the fence the
     * earlier requests' leases set. Every earlier request was answered, so none of them can renew the lease later.
     */
    synchronized void leaseEnded(long fence) {
        sidecarFence = fence;
    }

    /**
     * Whether, leaving, a key waits for its fence with a write whose attempt may still be under way at the sidecar
     * (the sender asks a sidecar that answered the end of the lease for its outcome).
     */
    synchronized boolean fencedInFlight() {
        return path == Path.FENCING && table.moves().fencedInFlight();
    }

    /**
     * The sidecar answered the end of the session's lease, and every answer since is applied: the keys waiting for
     * their fence with nothing that may still be under way there go through Connect now ({@link KeyMoves#liftSettled}).
     */
    synchronized void liftSettledFences() {
        if (path == Path.FENCING && table.moves().liftSettled() > 0) {
            signal();
        }
    }

    /** The sidecar is a new instance: what was pending at the old one is sent again from {@code holdUntil}. */
    synchronized void sidecarRestarted(long holdUntil) {
        table.moves().resendPending(holdUntil, () -> ++lastSeq);
        notifyAll();
    }

    /** When the next held key may be sent, or -1. */
    synchronized long nextRelease(long now) {
        return table.moves().nextRelease(now);
    }

    /** A request the sidecar surely did not take (never reached it, or refused whole): its writes are unsent again. */
    synchronized void returnBatch(List<StatusUpdate> batch) {
        for (StatusUpdate u : batch) {
            table.returned(u);
        }
    }

    /**
     * Applies the sidecar's answer to a request, once it is checked against what the agent sent: an item naming a
     * seq the request did not carry (or leaving one out), an outcome naming a seq never sent or a key other than its
     * seq's, make the whole answer a failed request (nothing of it applied). A write it says it wrote is to be read
     * back by the worker's store by {@code readBackBy}. Returns the writes it refused for good (for the log, a line
     * a minute).
     */
    synchronized List<AgentAnswer.Item> apply(List<StatusUpdate> batch, AgentAnswer answer, long now, long readBackBy)
            throws SidecarException {
        List<AgentAnswer.Item> refused = outcomes.apply(batch, answer, now, readBackBy);
        notifyAll();
        return refused;
    }

    /**
     * The highest outcome seq the agent can acknowledge: below the lowest write still unsettled (so the sidecar
     * never forgets an outcome the agent still waits for), or every seq so far when nothing is unsettled.
     */
    synchronized long ack() {
        return outcomes.ack(lastSeq);
    }

    /**
     * The sender's look at the table, on the sidecar's path: settles the writes the sidecar said it wrote that the
     * worker's store has read back since; returns one not read back in time (the sidecar said it wrote what it did
     * not), or null.
     */
    synchronized StatusUpdate verify(long now) {
        // The sender's step begins here: what other threads signalled so far, it now looks at (see await).
        signalsSeen = signals;
        int before = table.size();
        for (String key : readBack.takeRead()) {
            table.readBack(key, readBack);
        }
        StatusUpdate unseen = table.unseen(readBack, now);
        if (table.size() != before) {
            notifyAll();
        }
        return unseen;
    }

    /**
     * The sidecar instance that said it wrote {@code unseen} ({@link #verify} returned it), or null: rule 4 catches
     * that one, which may be an instance the agent left for a new one since.
     */
    synchronized String saidWrittenBy(StatusUpdate unseen) {
        return table.saidWrittenBy(unseen);
    }

    /** When the next write the sidecar says it wrote must have been read back, or -1. */
    synchronized long nextVerifyDeadline() {
        return table.nextVerifyDeadline();
    }

    /** The worker's store read a tombstone of {@code key}: the writes of it held so far are not written late. */
    synchronized void tombstoneRead(String key) {
        table.tombstoneRead(key);
    }

    /** The writes the drain to Connect's path abandoned since the last call, their keys deleted meanwhile. */
    synchronized List<StatusUpdate> takeAbandoned() {
        return table.moves().takeAbandoned();
    }

    /** The worker's store read a watched key: the sender looks whether a write is verified. */
    synchronized void readBackArrived() {
        signal();
    }

    synchronized boolean hasPending() {
        return table.hasPending();
    }

    synchronized boolean hasUnsent() {
        return table.hasUnsent();
    }

    /** The pending writes the sidecar accepted at or before {@code since} and has given no outcome for. */
    synchronized List<StatusUpdate> pendingSince(long since) {
        return table.pendingSince(since);
    }

    /** The sidecar says these pending writes' last attempt waited out its write bound ({@link KeyTable#timedOut}). */
    synchronized void timedOut(List<Long> seqs, long since) {
        table.timedOut(seqs, since);
    }

    /** When the longest pending write was accepted (ms), or -1 when none is pending. */
    synchronized long oldestPendingSince() {
        return table.oldestPendingSince();
    }

    /** Wakes the sender (an answer it waits for has come). */
    synchronized void wake() {
        signal();
    }

    /** The sender starts: writes on STARTING wait for its first exchange until {@code until} (ms), no longer. */
    synchronized void startingUntil(long until) {
        startingUntil = until;
    }

    /** The first exchange did not find the sidecar (or the store stops first): the writes waiting take Connect's path. */
    synchronized void leaveStarting() {
        if (path == Path.STARTING) {
            leave(null);
        }
    }

    synchronized void toQuiescing() {
        if (path == Path.CONNECT || path == Path.STARTING) {
            path = Path.QUIESCING;
        }
    }

    /** Connect's path went quiet: hand over from now on. Returns false if the path changed meanwhile. */
    synchronized boolean toSidecar() {
        if (path != Path.QUIESCING) {
            return false;
        }
        path = Path.SIDECAR;
        notifyAll();
        return true;
    }

    /** Leaves the sidecar (or the quiescing) for the fence, with the reason the sender logs and its kind. */
    synchronized void toFencing(Leaving.Kind kind, String why) {
        if (path == Path.SIDECAR || path == Path.QUIESCING || path == Path.STARTING) {
            leave(new Leaving(kind, why));
        }
    }

    /** Why the path left the sidecar, once (the sender logs it), or null. */
    synchronized Leaving takeLeaving() {
        Leaving reason = leaving;
        leaving = null;
        return reason;
    }

    /**
     * The next write Connect's own path must make now (the newest of the key, past its fence, whose newest is
     * oldest), or null: when the table is empty the path is then CONNECT (or STOPPED when the store stops).
     */
    synchronized StatusUpdate takeReady(long now) {
        StatusUpdate next = table.moves().takeReady(now);
        if (next != null) {
            handing = next.key;
            // Its checks are made (rule 3): a record of its key read from now on was not seen by them.
            lateWrites.begin(next, table.tookTombstone(next.key), now);
        } else if (table.isEmpty()) {
            path = stopRequested ? Path.STOPPED : Path.CONNECT;
            notifyAll();
        }
        return next;
    }

    /** Connect's own path took {@code update}, given out by {@link #takeReady}: a flush waiting for it goes on. */
    synchronized void drained(StatusUpdate update) {
        table.moves().drained(update);
        handing = null;
        notifyAll();
    }

    /** The earliest fence still ahead, or -1. */
    synchronized long nextFence(long now) {
        return table.moves().nextFence(now);
    }

    /**
     * The sender waits until another thread signals it (a write taken, a watched key read back, a flush or a stop
     * begun, the path left, an answer it waits for come), or {@code ms} pass. A signal given after the sender last
     * looked (its last wait's end, or {@link #verify}) ends this wait at once: the sender decides to wait outside this
     * lock, and a signal given meanwhile, notified to no one, would otherwise wait out {@code ms} (a watched key read
     * back in that gap held a flush for the whole probe interval, 5 s).
     */
    synchronized void await(long ms) throws InterruptedException {
        if (ms > 0 && signals == signalsSeen) {
            wait(ms);
        }
        signalsSeen = signals;
    }

    /** Another thread changed what the sender looks at: counted for {@link #await}, and the waiters woken. */
    private void signal() {
        signals++;
        notifyAll();
    }

    // ---- stop and flush ---------------------------------------------------------------------------------

    public synchronized void requestStop() {
        stopRequested = true;
        if (orphaned && path == Path.CONNECT) {
            path = Path.STOPPED;
        }
        signal();
    }

    /** The sender's thread ends without the path stopped: it hands over to Connect's path, and nothing comes after. */
    synchronized void orphan() {
        orphaned = true;
    }

    synchronized boolean stopRequested() {
        return stopRequested;
    }

    /** Ends the agent's part: from now on every write runs Connect's own method. */
    public synchronized void finish() {
        path = Path.STOPPED;
        notifyAll();
    }

    /**
     * Waits for {@link Path#STOPPED}: as long as one request may take ({@code requestMs}: the last request, or the
     * failure that leaves the sidecar) or until the fence, whichever is later (rule 3: the keys at the sidecar go
     * through Connect only then), and then {@code drainMs} more for Connect's path to take them. Returns the keys
     * still unsettled.
     */
    public synchronized int awaitStopped(long requestMs, long drainMs) throws InterruptedException {
        long start = System.nanoTime() / 1_000_000;
        while (path != Path.STOPPED) {
            long left = Math.max(start + requestMs, sidecarFence) + drainMs - System.nanoTime() / 1_000_000;
            if (left <= 0) {
                break;
            }
            wait(left);
        }
        return path == Path.STOPPED ? 0 : table.size();
    }

    /**
     * Connect's flush: waits up to {@code ms} until every write taken before the call has landed (Kafka acknowledged
     * it), been settled otherwise (dropped, refused, superseded), or been handed to Connect's own producer, whose flush
     * follows this one; returns whether all were. So a flush holds the rebalance as a stock worker's holds it, until
     * the records its producer took before it are delivered: a status held at the sidecar (Kafka away from it, or the
     * sidecar away and its key fenced) goes before the rebalance does, never after the new owner's status of its key.
     * It waits by key: a write the sidecar gave back and the agent sends again (under a new seq) is still waited for,
     * and so is a newer write of such a key taken meanwhile, which replaces it; writes of other keys taken while it
     * waits are not (a stock worker's flush waits only for the records sent before it), nor is the worker's reading
     * back of a write Kafka acknowledged (rule 4 checks it after).
     */
    public synchronized boolean awaitSettled(long ms) throws InterruptedException {
        long deadline = System.nanoTime() + ms * 1_000_000;
        Set<String> waited = table.awaitedKeys();
        if (handing != null) {
            waited.add(handing);
        }
        flushWaiters++;
        signal();
        try {
            while (!settled(waited)) {
                long left = (deadline - System.nanoTime()) / 1_000_000;
                if (left <= 0) {
                    return false;
                }
                wait(left);
            }
            return true;
        } finally {
            flushWaiters--;
        }
    }

    synchronized boolean flushWaiting() {
        return flushWaiters > 0;
    }

    /** Whether none of {@code keys} has a write still awaited, or on its way to Connect's producer; drops the settled. */
    private boolean settled(Set<String> keys) {
        keys.removeIf(key -> !table.awaitsWrite(key));
        return keys.isEmpty();
    }

    /** Leaves for the fence; only leaving the sidecar is a switch of path, logged with its reason. */
    private void leave(Leaving reason) {
        leaving = path == Path.SIDECAR ? reason : null;
        path = Path.FENCING;
        table.moves().fence(sidecarFence);
        signal();
    }
}
