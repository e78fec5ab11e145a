"""The workers' agents: a stock Connect worker's status writes, handed over by the Java agent attached to it
(``agent/``), through ``POST /agent/statuses`` (the protocol: agent/PROTOCOL.md).

Each agent session (one worker's store, from its start to its stop) sends its statuses in order, each numbered
(``seq``); each is judged alone, as the worker's own store would (``put``, ``put_safe``, a tombstone for
``DESTROYED``, a topic status), and the session is told each outcome on a later answer until it acknowledges it.

- **The agent holds its writes** until their outcome: a session's writes are not spooled, and a restarted sidecar
  (a new ``instance``) does not replay them: the agent sends what is still pending again.
- **A lease fences the switch of path.** Every request renews the session's lease (``lease_ms``); once it has
  ended, no write of the session is started any more (``store.Lease``): the agent writes through Connect's own
  store from then on, and an older status of ours must not land after its newer one. A lease that ended stays ended
  for the writes taken before: a later request of the session (its agent back on the sidecar) starts a new term
  (``LeaseTerm``), which lets only the writes taken from then on be sent. A request that ends the lease
  (``LEASE_ENDING_MS``) ends the term at once, and its answer gives back (``expired``) the writes of every key none of
  whose writes may be in flight, so that the agent need not wait the write bound for them.
- **The sidecar says what timed out.** An answer lists the pending writes whose last attempt waited out the write
  bound without Kafka's answer (``timed_out``): the agent asks the worker's own producer then (rule 5), rather than a
  poll and a second later.
- **A final request hands over for good** (the worker's store stops while the sidecar is up): from then on the
  session's pending writes are the sidecar's: written whatever the lease, and spooled.
- **A request may wait for outcomes** (``wait_ms``, the agent's flush before a rebalance): its answer comes once
  every pending write of the session has its outcome, or after that bound, or once the agent says (``wake``) that it
  took a write while the request was on its way: that write goes in the next request at once.
- **The sidecar says what it could not write.** A write of a session that the sidecar did not start before the
  lease ended settles ``expired``: not written by this instance, never will be, the agent's again (it sends it once
  more, or writes it through Connect after its key's fence). So does one it gave up without Kafka refusing it (its
  retries spent after a retriable error, the store stopped), which Connect's store would send again until it lands:
  ``failed`` is only what Kafka refused for good. ``superseded`` means only what Connect's own store would drop too.
- **Bounded.** A session keeps at most ``MAX_OUTCOMES_KEPT`` outcomes not yet acknowledged (the lowest seqs are
  dropped first: the agent takes a write without an outcome back past the write bound) and sends at most
  ``MAX_OUTCOMES_SENT`` per answer, lowest seqs first; at most ``MAX_SESSIONS`` sessions are kept (one idle past
  ``SESSION_IDLE_S`` with nothing pending is forgotten; past the bound the longest idle goes, its lease ended). What is
  dropped is counted and logged at most once a minute.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .errors import ErrorKind, classify
from .logs import RateLimit
from .retry.updates import Outcome, Result, StatusUpdate
from .store import GENERATION_MOVED

log = logging.getLogger(__name__)

PROTOCOL = 1
# A session idle this long with nothing pending is forgotten; at most this many are kept.
SESSION_IDLE_S = 600.0
MAX_SESSIONS = 1024
# The outcomes a session keeps until acknowledged, and sends per answer (a few hundred KB).
MAX_OUTCOMES_KEPT = 10_000
MAX_OUTCOMES_SENT = 1_000
# Why the store does not send a session's write any more (``LeaseTerm``): its outcome is then ``expired``.
LEASE_ENDED = "the agent's lease ended: its worker writes through Connect's own store"
EXPIRED = "expired"
EXPIRED_REASON = ("not written by this sidecar instance and never will be (the agent's lease ended before it was "
                  "sent): the write is the agent's again")
NEVER_SENT_AGAIN_REASON = ("not written by this sidecar instance and never will be (its attempt failed and Connect's "
                           "retry rule keeps it from being sent again: {reason}): the write is the agent's again")
GIVEN_UP_REASON = ("given up by this sidecar instance, never refused by Kafka ({reason}{error}): the write is the "
                   "agent's again, as a stock worker's store sends a write that failed retriably again until it lands")
FORGOTTEN_REASON = ("its outcome is no longer kept (a session keeps a bounded number): the write is the agent's "
                    "again")
# The lease of a request that ends the session's lease (the agent leaving a sidecar that still answers, rule 5).
LEASE_ENDING_MS = 1
# A write whose last attempt failed with this waited out its whole write bound (librdkafka's message.timeout.ms, the
# write bound) without Kafka's answer: rule 5's evidence, said on the answer (``timed_out``) as soon as the sidecar has
# it, where the agent would otherwise wait the write bound, a poll and a second to find it out.
TIMED_OUT_ERROR = "_MSG_TIMED_OUT"
# Dropped outcomes and evicted sessions are logged at most this often, with a count.
DROP_LOG_INTERVAL_S = 60.0


class LeaseTerm:
    """The lease of the writes a session took in one term: from a request to the end of the lease it renewed, as long
    as later requests keep renewing it in time (``store.Lease``). A term that ended never runs again: its writes not
    yet sent were the agent's from then on (it wrote their keys through Connect after their fence), so a request that
    comes after the end (the agent back on this sidecar, under the same session) starts a new term, never reviving a
    write that waited all along (behind a held partition, a key's retry) to land over the newer status."""

    __slots__ = ("ended", "session")

    def __init__(self, session: AgentSession) -> None:
        self.session = session
        self.ended = False

    def __call__(self) -> str | None:
        """Why the term's writes must not be sent any more (its lease ended), or None."""
        if self.ended:
            return LEASE_ENDED
        return self.session.lease()


@dataclass(slots=True)
class Pending:
    """One accepted write of a session, until its outcome is acknowledged, and the lease term it was taken in."""

    key: str
    update: StatusUpdate
    term: LeaseTerm


@dataclass(slots=True)
class AgentSession:
    """One agent's writes: pending ones by seq, settled ones not yet acknowledged, and its lease (monotonic
    seconds)."""

    agent: str
    worker_id: str | None = None
    pending: dict[int, Pending] = field(default_factory=dict)
    settled: dict[int, dict[str, Any]] = field(default_factory=dict)
    lease_until: float = 0.0
    final: bool = False
    last_seen: float = 0.0
    # The highest seq taken in: a seq at or below it again (an answer the agent lost) is not written twice.
    last_seq: int = 0
    # The highest seq the agent said it holds and has not sent (``wake``): while above every seq taken, an answer does
    # not wait for outcomes.
    woken_by: int = 0
    # The term the session's new writes are taken in (``LeaseTerm``).
    term: LeaseTerm = field(init=False)
    # Set by ``wake`` while an answer waits (``settling``).
    _wake: asyncio.Event | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.term = LeaseTerm(self)

    def lease(self) -> str | None:
        """Why the session's writes must not be sent any more (its lease ended), or None."""
        if self.final or time.monotonic() <= self.lease_until:
            return None
        return LEASE_ENDED

    def end_term(self) -> None:
        """The lease ended: the writes taken so far are never sent any more; a new term takes the next ones."""
        self.term.ended = True
        self.term = LeaseTerm(self)

    def renew(self, lease_ms: int, sent_at_ms: int | None) -> None:
        """A request of the session arrived: its lease runs ``lease_ms`` from now, or from when the agent sent it
        (its wall clock) if that is earlier. If it had ended, it stays ended for the writes taken before."""
        if self.lease() is not None:
            self.end_term()
        now = time.monotonic()
        self.last_seen = now
        until = now + lease_ms / 1000
        if sent_at_ms is not None:
            until = min(until, now + (sent_at_ms + lease_ms) / 1000 - time.time())
        self.lease_until = until

    async def end_lease(self, idle: Callable[[], Callable[[StatusUpdate], bool]], timeout: float) -> None:
        """The agent ended the session's lease (a request of ``LEASE_ENDING_MS``): its term ends now, so no write of it
        is sent again. The writes that may be in flight get up to ``timeout`` seconds to settle (an attempt that fails
        now settles ``expired``, the lease having ended); then the writes of every key none of whose writes may still be
        in flight settle ``expired`` at once: their keys are the agent's now, not a write bound later. ``idle()`` judges
        which writes wait for their next attempt, or are parked (no attempt of theirs in flight), as of its call. A key
        with a write that may be in flight keeps all its writes pending, to settle as the engine comes to them."""
        self.end_term()
        still = idle()
        busy = [pending.update for pending in self.pending.values()
                if not pending.update.done() and not still(pending.update)]
        if busy and timeout > 0:
            await asyncio.wait([asyncio.ensure_future(update.settled()) for update in busy], timeout=timeout)
        still = idle()
        unsettled = [(seq, pending) for seq, pending in self.pending.items() if not pending.update.done()]
        busy_keys = {pending.key for _, pending in unsettled if not still(pending.update)}
        for seq, pending in unsettled:
            if pending.key not in busy_keys:
                del self.pending[seq]
                self.settled[seq] = {"seq": seq, "key": pending.key, "result": EXPIRED,
                                     "attempts": pending.update.attempts, "reason": EXPIRED_REASON}

    def timed_out(self) -> list[int]:
        """The pending writes whose last attempt waited out the write bound without Kafka's answer (the sidecar tries
        them again), lowest seqs first, at most ``MAX_OUTCOMES_SENT``."""
        return heapq.nsmallest(MAX_OUTCOMES_SENT, (
            seq for seq, pending in self.pending.items()
            if not pending.update.done() and (error := pending.update.last_error) is not None
            and error.name == TIMED_OUT_ERROR))

    def acknowledge(self, ack: int) -> None:
        """The agent has taken in every outcome up to ``ack``."""
        for seq in [seq for seq in self.settled if seq <= ack]:
            del self.settled[seq]

    def collect(self) -> int:
        """Move the pending writes that have their outcome to the settled ones, keeping at most
        ``MAX_OUTCOMES_KEPT`` of those (the lowest seqs dropped first); returns how many were dropped."""
        for seq in [seq for seq, pending in self.pending.items() if pending.update.done()]:
            pending = self.pending.pop(seq)
            outcome = pending.update.outcome
            assert outcome is not None
            self.settled[seq] = outcome_body(seq, pending.key, outcome)
        excess = len(self.settled) - MAX_OUTCOMES_KEPT
        if excess <= 0:
            return 0
        for seq in heapq.nsmallest(excess, self.settled):
            del self.settled[seq]
        return excess

    async def settling(self, timeout: float) -> None:
        """Wait until every pending write has its outcome, at most ``timeout`` seconds, or until the agent says it holds
        a write it has not sent (``wake``)."""
        if not self.pending or self.woken():
            return
        wake = self._wake = asyncio.Event()
        all_settled = asyncio.ensure_future(asyncio.wait(
            [asyncio.ensure_future(pending.update.settled()) for pending in self.pending.values()]))
        woken = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait([all_settled, woken], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            all_settled.cancel()
            if self._wake is wake:
                self._wake = None

    def wake(self, seq: int) -> bool:
        """The agent took a write (``seq``) while a request of the session was on its way, and holds it for the next:
        the answer waiting for outcomes (``settling``) comes now, and so does any until the session takes that seq, so
        that the write waits one round trip, not Kafka's acknowledgement of the writes before it. False (nothing to
        do) when the session took that seq already."""
        if seq <= self.last_seq:
            return False
        self.woken_by = max(self.woken_by, seq)
        if self._wake is not None:
            self._wake.set()
        return True

    def woken(self) -> bool:
        """Whether the agent holds a write newer than every one the session took (``wake``)."""
        return self.woken_by > self.last_seq

    def outcomes(self) -> list[dict[str, Any]]:
        """The settled writes not acknowledged yet, lowest seqs first, at most ``MAX_OUTCOMES_SENT``."""
        return [self.settled[seq] for seq in heapq.nsmallest(MAX_OUTCOMES_SENT, self.settled)]


def outcome_body(seq: int, key: str, outcome: Outcome) -> dict[str, Any]:
    """An outcome as an answer carries it: a write the session's lease kept from being sent, or one given up after a
    retriable error, is ``expired`` (the agent's again); ``failed`` is only a write Kafka refused for good."""
    if outcome.result is Result.SUPERSEDED and outcome.reason == LEASE_ENDED:
        return {"seq": seq, "key": key, "result": EXPIRED, "attempts": outcome.attempts, "reason": EXPIRED_REASON}
    if outcome.result is Result.SUPERSEDED and outcome.reason.startswith(GENERATION_MOVED):
        # Connect's store drops a retry once its worker's generation moved, but only after its own attempt failed:
        # the worker's producer may reach Kafka where this sidecar did not. The agent takes it back (rule 5).
        return {"seq": seq, "key": key, "result": EXPIRED, "attempts": outcome.attempts,
                "reason": NEVER_SENT_AGAIN_REASON.format(reason=outcome.reason)}
    if outcome.result is Result.FAILED and (outcome.error is None or classify(outcome.error) is not ErrorKind.FATAL):
        # Connect's store re-sends a write that failed with a retriable error for as long as its generation is the
        # store's; only a fatal one is dropped. Given up here after its retries (their number or time bound spent, the
        # store stopped), it is the agent's again: sent again while on this sidecar, or through Connect after its fence.
        error = "" if outcome.error is None else f"; last error: {outcome.error.name}"
        return {"seq": seq, "key": key, "result": EXPIRED, "attempts": outcome.attempts,
                "reason": GIVEN_UP_REASON.format(reason=outcome.reason, error=error)}
    body: dict[str, Any] = {"seq": seq, "key": key, "result": outcome.result.value, "attempts": outcome.attempts}
    if not outcome.ok:
        body["reason"] = outcome.reason
    return body


class AgentSessions:
    """Every agent session this sidecar serves, bounded in number."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._sessions: dict[str, AgentSession] = {}
        self._clock = clock
        # This process's id: an agent that sees it change knows the sidecar restarted.
        self.instance = uuid.uuid4().hex
        # Updates taken from agents, by what became of them at once (pending, dropped, refused).
        self.taken: collections.Counter[str] = collections.Counter()
        self.outcomes_dropped = 0
        self.sessions_evicted = 0
        self._dropped_unlogged = 0
        self._evicted_unlogged = 0
        self._drop_log = RateLimit(DROP_LOG_INTERVAL_S, clock)
        self._evict_log = RateLimit(DROP_LOG_INTERVAL_S, clock)

    def session(self, agent: str) -> AgentSession:
        """The agent's session (made if new; past the bound the idle ones, then the longest idle, forgotten)."""
        session = self._sessions.get(agent)
        if session is None:
            self._forget_idle()
            session = self._sessions[agent] = AgentSession(agent, last_seen=self._clock())
        return session

    def find(self, agent: str) -> AgentSession | None:
        """The agent's session, or None (none made)."""
        return self._sessions.get(agent)

    def collect(self, session: AgentSession) -> None:
        """Settle what has its outcome in ``session``, counting (and, once a minute, logging) outcomes dropped."""
        dropped = session.collect()
        if dropped:
            self.outcomes_dropped += dropped
            self._dropped_unlogged += dropped
            if self._drop_log.take() is not None:
                log.warning("Dropped %d outcome(s) the agents had not acknowledged (at most %d are kept per session, "
                            "the oldest go first; the agent sends such writes again)", self._dropped_unlogged,
                            MAX_OUTCOMES_KEPT)
                self._dropped_unlogged = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def pending_count(self) -> int:
        """Writes of every session without an outcome yet."""
        return sum(len(session.pending) for session in self._sessions.values())

    def _forget_idle(self) -> None:
        now = self._clock()
        for agent, session in list(self._sessions.items()):
            self.collect(session)
            if not session.pending and now - session.last_seen > SESSION_IDLE_S:
                del self._sessions[agent]
        excess = len(self._sessions) - MAX_SESSIONS + 1
        if excess <= 0:
            return
        # The bound holds: the idle ones without pending writes first, then the longest idle of all, whose lease ends
        # (its writes not yet sent expire; its agent takes back what has no outcome).
        oldest = sorted(self._sessions.values(), key=lambda s: (bool(s.pending), s.last_seen))[:excess]
        for session in oldest:
            if not session.final:
                session.end_term()
            del self._sessions[session.agent]
        self.sessions_evicted += excess
        self._evicted_unlogged += excess
        if self._evict_log.take() is not None:
            log.warning("Forgot %d agent session(s), the longest idle first: more than %d agents (the last forgotten "
                        "was idle for %.0f s)", self._evicted_unlogged, MAX_SESSIONS, now - oldest[-1].last_seen)
            self._evicted_unlogged = 0


class AgentsCollector(Collector):
    """The workers' agents, read at each scrape: sessions, their pending writes, and the updates taken."""

    def __init__(self, agents: AgentSessions) -> None:
        self._agents = agents

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("status_agent_sessions", "Sessions of workers' agents (a worker's status store each, "
                                "from its start to its stop) this sidecar serves.", value=len(self._agents))
        yield GaugeMetricFamily("status_agent_pending", "Updates of workers' agents without an outcome yet.",
                                value=self._agents.pending_count())
        taken = CounterMetricFamily("status_agent_updates", "Updates workers' agents handed over, by what became of "
                                    "them at once: pending (taken), dropped (a put_safe Connect's rules drop), refused "
                                    "(never writable).", labels=["result"])
        for result in ("pending", "dropped", "refused"):
            taken.add_metric([result], self._agents.taken[result])
        yield taken
        yield CounterMetricFamily("status_agent_outcomes_dropped", "Outcomes of agents' writes dropped before the "
                                  "agent acknowledged them (a session keeps a bounded number; the agent sends such a "
                                  "write again).", value=self._agents.outcomes_dropped)
        yield CounterMetricFamily("status_agent_sessions_evicted", "Agent sessions forgotten past the bound on "
                                  "sessions, the longest idle first.", value=self._agents.sessions_evicted)
