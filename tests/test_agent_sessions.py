"""What the sidecar keeps for the workers' agents is bounded (agent/PROTOCOL.md, rule 6): the outcomes a session keeps
until acknowledged and sends per answer, the number of sessions, each dropped thing counted and logged at most once a
minute. Before, an agent whose acknowledgement was held back by one write without an outcome got every later outcome on
every answer (2 KB growing to 21.7 MB per answer, /health answered after 3.65 s), and sessions with pending writes were
never forgotten."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest

from harness.faulty_cluster import FaultyCluster
from status_store import agents
from status_store.api.routes import agent as agent_route
from status_store.retry.updates import StatusUpdate, UpdateKind
from status_store.store import StatusStore

from .helpers import last_values
from .test_agent_route import NOT_ENOUGH_REPLICAS, Agent, served, task

__all__ = ["served"]


async def written(store: StatusStore) -> None:
    """Every write submitted so far has its outcome."""
    await store.flush(15.0)


async def test_a_session_keeps_and_sends_a_bounded_number_of_outcomes_lowest_seqs_first(
        served: tuple[StatusStore, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    store, http = served
    monkeypatch.setattr(agents, "MAX_OUTCOMES_KEPT", 40)
    monkeypatch.setattr(agents, "MAX_OUTCOMES_SENT", 15)
    monkeypatch.setattr(agent_route, "OFF_LOOP_ITEMS", 10)
    caplog.set_level(logging.WARNING, logger="status_store.agents")
    agent = Agent(http, store)

    async def post(*updates: dict[str, object]) -> dict[str, object]:
        # The agent acknowledges nothing (one write of its own is still unsettled, it thinks).
        answer = await http.post("/agent/statuses", json={"agent": agent.name, "ack": 0, "updates": list(updates)})
        assert answer.status_code == 200
        body: dict[str, object] = json.loads(answer.content)
        return body

    for batch in range(4):
        await post(*[agent.item(**task("c", batch * 25 + i)) for i in range(25)])
    await written(store)
    answer = await post()
    outcomes: list[dict[str, object]] = answer["outcomes"]  # type: ignore[assignment]
    assert [o["seq"] for o in outcomes] == list(range(61, 76)), "the 40 newest kept, the lowest 15 sent"
    assert {o["result"] for o in outcomes} == {"written"}
    # Once a minute at most: what is dropped meanwhile is counted, not logged.
    await post(*[agent.item(**task("d", i)) for i in range(5)])
    await written(store)
    await post()
    dropped = [r.getMessage() for r in caplog.records if "Dropped" in r.getMessage()]
    assert len(dropped) == 1, dropped
    metrics = (await http.get("/metrics")).text
    assert "status_agent_outcomes_dropped_total 65.0" in metrics, [m for m in metrics.splitlines() if "agent" in m]
    # A write sent again whose outcome was dropped is the agent's again: it sends it once more, under a new seq.
    [item] = (await post({"seq": 1, **task("c", 0)}))["accepted"]  # type: ignore[misc]
    assert item["result"] == "expired", item
    assert "no longer kept" in item["reason"]


async def test_the_number_of_sessions_is_a_bound_that_holds(
        served: tuple[StatusStore, httpx.AsyncClient], mock_cluster: FaultyCluster, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    store, http = served
    monkeypatch.setattr(agents, "MAX_SESSIONS", 3)
    caplog.set_level(logging.WARNING, logger="status_store.agents")
    # Every session holds a write without an outcome (each attempt fails, the partitions are held, probes fail too):
    # before, none was ever forgotten.
    mock_cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * 10_000)
    kept = []
    try:
        for n in range(6):
            agent = Agent(http, store, f"agent-{n}")
            await agent.send(agent.item(**task("c", n)), lease_ms=60_000)
            kept.append(agent)
            await asyncio.sleep(0.01)  # sessions of distinct ages (last seen): eviction goes oldest first
        metrics = (await http.get("/metrics")).text
        assert "status_agent_sessions 3.0" in metrics
        assert "status_agent_sessions_evicted_total 3.0" in metrics
        evicted = [r.getMessage() for r in caplog.records if "Forgot" in r.getMessage()]
        assert len(evicted) == 1, evicted  # then counted, not logged, for a minute
    finally:
        mock_cluster.clear_request_errors(FaultyCluster.PRODUCE)
    for agent in kept[3:]:
        assert (await agent.settled(1))[1]["result"] == "written"
    await store.read_your_writes(15.0)
    # The longest idle went first, their leases ended: their writes were never sent again.
    assert sorted(key for key in last_values(store) if key.startswith(b"status-task-c-")) == [
        b"status-task-c-3", b"status-task-c-4", b"status-task-c-5"]


async def test_ending_the_lease_gives_back_every_write_of_a_key_with_nothing_in_flight_and_keeps_the_others() -> None:
    # Keys a and b: a's two writes wait for their next attempt; b's first waits, its second may be in flight, and its
    # attempt does not settle within the wait. a's are given back at once; b's stay pending, since its write in flight
    # may land, and b's older write, given back alone, would go through Connect before it.
    session = agents.AgentSessions().session("agent-1")
    writes = {seq: StatusUpdate(key, b"v", UpdateKind.TASK) for seq, key in
              ((1, "status-task-a-0"), (2, "status-task-b-0"), (3, "status-task-a-0"), (4, "status-task-b-0"))}
    for seq, update in writes.items():
        session.pending[seq] = agents.Pending(update.key, update, session.term)
    idle = {writes[1], writes[2], writes[3]}
    await session.end_lease(lambda: idle.__contains__, 0.05)
    assert session.pending[2].term.ended
    assert session.term is not session.pending[2].term
    assert sorted(session.pending) == [2, 4]
    assert [(body["seq"], body["key"], body["result"]) for body in session.outcomes()] == [
        (1, "status-task-a-0", "expired"), (3, "status-task-a-0", "expired")]


def waiting_session(*seqs: int) -> agents.AgentSession:
    """A session whose writes of these seqs were taken (the last the highest seq) and never settle."""
    session = agents.AgentSessions().session("agent-1")
    for seq in seqs:
        update = StatusUpdate(f"status-task-c-{seq}", b"v", UpdateKind.TASK)
        session.pending[seq] = agents.Pending(update.key, update, session.term)
        session.last_seq = seq
    return session


async def test_a_wake_for_a_write_the_agent_holds_ends_the_wait_for_outcomes() -> None:
    # A status the agent takes while a request waits for Kafka's acknowledgement of the writes before it waited for
    # that answer, a round trip and Kafka's acknowledgement more than a stock worker's record (bench.connect_outage: a
    # resume's slowest statuses reached the sidecar's producer 8-10 ms behind the stock worker's). The agent says so
    # (``wake``), and the answer comes at once. Without it, this wait would run its hour.
    session = waiting_session(1, 2)
    waiting = asyncio.ensure_future(session.settling(3600))
    await asyncio.sleep(0)
    assert not waiting.done()
    assert session.wake(3)
    await asyncio.wait_for(waiting, 30)
    assert sorted(session.pending) == [1, 2]  # nothing settled: the answer only stopped waiting
    # Until the session takes that write, no answer waits: the wake may come before the request it means.
    await asyncio.wait_for(session.settling(3600), 30)
    session.last_seq = 3
    assert not session.woken()
    waiting = asyncio.ensure_future(session.settling(0.05))
    await asyncio.sleep(0)
    assert not waiting.done()
    await waiting


async def test_a_wake_for_a_write_the_session_took_already_changes_nothing() -> None:
    session = waiting_session(1, 2)
    assert not session.wake(2)
    assert not session.wake(1)
    waiting = asyncio.ensure_future(session.settling(3600))
    for _ in range(10):  # the loop's turns: nothing ends the wait
        await asyncio.sleep(0)
    assert not waiting.done()
    waiting.cancel()
    # A wake with nothing waiting holds for the next wait, until the session takes its seq.
    assert session.wake(5)
    await asyncio.wait_for(session.settling(3600), 30)
