"""POST /agent/statuses, the route a worker's agent hands its statuses to (agent/PROTOCOL.md), on the mock cluster:
each update judged alone and written as the worker's own store would write it, its outcome told until acknowledged,
nothing written twice, and nothing of a session started after its lease ended."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError, murmur2
from prometheus_client import CollectorRegistry

from harness.faulty_cluster import FaultyCluster
from status_store.agents import outcome_body
from status_store.api import create_app
from status_store.connect.codec import encode_status, encode_topic_status
from status_store.connect.model import UNVERSIONED, State, TopicStatus
from status_store.retry.updates import Outcome, Result
from status_store.store import StatusStore

from .conftest import PARTITIONS, Broker, StoreFactory
from .helpers import eventually, eventually_awaited, last_values

WAIT = 15.0
NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS
TOPIC_AUTHORIZATION_FAILED = KafkaError.TOPIC_AUTHORIZATION_FAILED
# A sidecar that gives a write up soon: one retry, each attempt timed out after 300 ms.
GIVES_UP_SOON = {"status.storage.retry.max.retries": "1", "status.storage.retry.delivery.timeout.ms": "300"}


class Agent:
    """An agent session against the app: numbered updates, acknowledged outcomes."""

    def __init__(self, http: httpx.AsyncClient, store: StatusStore, name: str = "agent-1") -> None:
        self.http, self.store, self.name = http, store, name
        self.seq = 0
        self.ack = 0
        self.outcomes: dict[int, dict[str, Any]] = {}

    def item(self, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        return {"seq": self.seq, **fields}

    async def send(self, *updates: dict[str, Any], **extra: Any) -> dict[str, Any]:
        body = {"agent": self.name, "worker_id": "w1:8083", "ack": self.ack, "updates": list(updates), **extra}
        response = await self.http.post("/agent/statuses", json=body)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        for outcome in answer["outcomes"]:
            self.outcomes[outcome["seq"]] = outcome
        if self.outcomes:
            self.ack = max(self.outcomes)
        return answer

    async def settled(self, *seqs: int, timeout: float = WAIT) -> dict[int, dict[str, Any]]:
        """Poll until these seqs have their outcomes."""
        async def untold() -> list[int]:
            await self.send()
            return [seq for seq in seqs if seq not in self.outcomes]
        await eventually_awaited(untold, lambda missing: not missing, timeout, what="the seqs without an outcome")
        return {seq: self.outcomes[seq] for seq in seqs}


def task(connector: str, number: int, state: str = "RUNNING", **fields: Any) -> dict[str, Any]:
    return {"kind": "task", "connector": connector, "task": number, "state": state, "trace": None,
            "worker_id": "w1:8083", "generation": 3, **fields}


def connector(name: str, state: str = "RUNNING", **fields: Any) -> dict[str, Any]:
    return {"kind": "connector", "connector": name, "state": state, "trace": None, "worker_id": "w1:8083",
            "generation": 3, **fields}


@pytest.fixture
async def served(mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path,
                 request: pytest.FixtureRequest) -> AsyncIterator[tuple[StatusStore, httpx.AsyncClient]]:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    settings = {"status.storage.retry.initial.backoff.ms": "50", "status.storage.retry.probe.max.backoff.ms": "100",
                "status.storage.spool.path": str(tmp_path / "spool.db"), **getattr(request, "param", {})}
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=CollectorRegistry(), **settings) as store:
        app = create_app(store)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sidecar") as http:
            yield store, http


async def test_statuses_are_written_as_the_workers_store_writes_them(
        served: tuple[StatusStore, httpx.AsyncClient]) -> None:
    store, http = served
    agent = Agent(http, store)
    updates = [agent.item(**connector("c", version="1.0")), agent.item(**task("c", 0, version=None)),
               agent.item(**task("c", 1, "FAILED", trace="boom\n\tat X")),  # a 3.x status: no version
               agent.item(kind="topic", connector="c", topic="t-1", task=0, discoverTimestamp=1700000000000),
               agent.item(**connector("gone")), agent.item(**connector("gone", "DESTROYED"))]
    answer = await agent.send(*updates)
    assert [a["result"] for a in answer["accepted"]] == ["pending"] * 6
    outcomes = await agent.settled(*range(1, 7))
    assert {o["result"] for o in outcomes.values()} == {"written"}
    await store.read_your_writes(WAIT)
    values = last_values(store)
    assert values[b"status-connector-c"] == encode_status(State.RUNNING, "w1:8083", 3, None, "1.0")
    assert values[b"status-task-c-0"] == encode_status(State.RUNNING, "w1:8083", 3, None, None)
    assert values[b"status-task-c-1"] == encode_status(State.FAILED, "w1:8083", 3, "boom\n\tat X", UNVERSIONED)
    assert values[b"status-topic-t-1:connector-c"] == encode_topic_status(TopicStatus("t-1", "c", 0, 1700000000000))
    # DESTROYED is a tombstone of that one key, as Connect writes it.
    assert values[b"status-connector-gone"] is None
    # Acknowledged outcomes are not told again.
    assert (await agent.send())["outcomes"] == []


async def test_each_update_is_judged_alone(served: tuple[StatusStore, httpx.AsyncClient]) -> None:
    store, http = served
    agent = Agent(http, store)
    answer = await agent.send(agent.item(**task("c", 0)), agent.item(**task("c", 1, "STOPPED")),
                              agent.item(**connector("c", state="NOPE")), agent.item(**connector("c")))
    assert [a["result"] for a in answer["accepted"]] == ["pending", "refused", "refused", "pending"]
    assert [a.get("error_code") for a in answer["accepted"]] == [None, 422, 422, None]
    await agent.settled(1, 4)
    await store.read_your_writes(WAIT)
    assert set(last_values(store)) == {b"status-task-c-0", b"status-connector-c"}
    # An update without its seq cannot be answered: the whole request is refused, nothing taken.
    response = await http.post("/agent/statuses", json={"agent": "agent-1", "updates": [task("d", 0)]})
    assert response.status_code == 400
    assert response.json()["error_code"] == 400


async def test_put_safe_is_judged_against_the_topic_as_connect_judges_it(
        served: tuple[StatusStore, httpx.AsyncClient]) -> None:
    store, http = served
    agent = Agent(http, store)
    await agent.send(agent.item(**task("c", 0, worker_id="w2:8083", generation=7)))
    await agent.settled(1)
    await store.read_your_writes(WAIT)
    answer = await agent.send(agent.item(**task("c", 0, "UNASSIGNED", generation=6, safe=True)))
    assert answer["accepted"][0]["result"] == "dropped"
    assert last_values(store)[b"status-task-c-0"] == encode_status(State.RUNNING, "w2:8083", 7, None, UNVERSIONED)


async def test_an_update_sent_again_is_written_once(served: tuple[StatusStore, httpx.AsyncClient],
                                                    mock_cluster: FaultyCluster) -> None:
    store, http = served
    agent = Agent(http, store)
    update = agent.item(**task("c", 0))
    first = await agent.send(update)
    again = await agent.send(update)  # the answer to the first was lost
    assert first["accepted"] == again["accepted"] == [{"seq": 1, "result": "pending"}]
    assert (await agent.settled(1))[1]["result"] == "written"
    assert store.queue.attempts_total == 1


async def test_a_write_of_a_session_not_sent_before_its_lease_ended_expires(
        served: tuple[StatusStore, httpx.AsyncClient], mock_cluster: FaultyCluster) -> None:
    store, http = served
    agent = Agent(http, store)
    # The first attempt fails; its partition is held, and the probe would go after the lease ended.
    mock_cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * 3)
    await agent.send(agent.item(**connector("c")), lease_ms=200)
    # The lease ends (the agent writes through Connect now): the write settles, unsent.
    await store.flush(WAIT)
    await store.read_your_writes(WAIT)
    assert b"status-connector-c" not in last_values(store)
    # Not "superseded" (the agent took that as done, and the status was lost): the write is the agent's again.
    outcome = (await agent.settled(1))[1]
    assert outcome["result"] == "expired"
    assert "lease ended" in outcome["reason"]
    assert "the agent's again" in outcome["reason"]


@pytest.mark.parametrize("then_final", [False, True], ids=["back", "back-then-final"])
async def test_a_write_held_past_its_lease_stays_expired_when_the_same_session_comes_back(
        served: tuple[StatusStore, httpx.AsyncClient], mock_cluster: FaultyCluster, then_final: bool) -> None:
    # The agent leaves (a request whose lease_ms is 1, rule 5's leaving) while its write waits in a held partition's
    # line behind another agent's write, the partition's probe; after its key's fence it writes the key through
    # Connect. Coming back, it sends its probe under the same session id, which renews the lease: the held write must
    # not land then, over the newer status the worker wrote meanwhile. Before, the lease was asked only as a write went
    # out: the renewal handed the write back to the sidecar, and it was written once the partition opened. Nor does
    # the worker's final request, when its store stops, hand that write over to the sidecar's spool.
    store, http = served
    assert store.spool is not None
    leaving, staying = Agent(http, store, "leaving"), Agent(http, store, "staying")
    partition = murmur2(b"status-connector-c", PARTITIONS)
    same_partition = next(name for name in (f"other-{n}" for n in range(1000))
                          if murmur2(f"status-connector-{name}".encode(), PARTITIONS) == partition)
    mock_cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * 10_000)
    try:
        await staying.send(staying.item(**connector(same_partition)), lease_ms=60_000)
        await eventually(lambda: partition in store.queue.held_partitions)  # its attempt failed: the partition is held
        await leaving.send(leaving.item(**connector("c", "PAUSED")), lease_ms=60_000)  # in the line, behind it
        left_at = int(time.time() * 1000)
        await leaving.send(lease_ms=1, sent_at_ms=left_at)
        await eventually(lambda: time.time() * 1000 > left_at + 5)  # the lease has ended
        # Back: GET / matches, and the probe (an empty request, as the agent sends it) renews the same session.
        assert (await http.get("/")).status_code == 200
        await leaving.send(lease_ms=10_000, sent_at_ms=int(time.time() * 1000))
        if then_final:
            await leaving.send(final=True, lease_ms=10_000, sent_at_ms=int(time.time() * 1000))
            assert store.commit_spool()
            assert store.spool.pending() == []
    finally:
        mock_cluster.clear_request_errors(FaultyCluster.PRODUCE)
    assert (await staying.settled(1))[1]["result"] == "written"
    outcome = (await leaving.settled(1))[1]
    await store.flush(WAIT)
    await store.read_your_writes(WAIT)
    assert b"status-connector-c" not in last_values(store)
    assert outcome["result"] == "expired", outcome
    assert "the agent's again" in outcome["reason"]


async def test_a_final_request_hands_pending_writes_over_for_good(served: tuple[StatusStore, httpx.AsyncClient],
                                                                  mock_cluster: FaultyCluster) -> None:
    store, http = served
    agent = Agent(http, store)
    assert store.spool is not None
    mock_cluster.broker_down(1)
    try:
        await agent.send(agent.item(**connector("c")), lease_ms=300)
        # A session's writes are the agent's: not in the spool...
        assert store.commit_spool()
        assert store.spool.pending() == []
        await agent.send(final=True, lease_ms=300)
        # ... until it hands them over: then they are written whatever the lease, and kept across a crash.
        assert store.commit_spool()
        assert [row.key for row in store.spool.pending()] == ["status-connector-c"]
        # Past its lease (300 ms) with the broker still down: no state announces a lease's end, time passes.
        await asyncio.sleep(0.5)
    finally:
        mock_cluster.broker_up(1)
    assert (await agent.settled(1))[1]["result"] == "written"


async def test_a_final_request_that_arrives_after_its_lease_hands_nothing_over(
        served: tuple[StatusStore, httpx.AsyncClient], mock_cluster: FaultyCluster) -> None:
    store, http = served
    agent = Agent(http, store)
    assert store.spool is not None
    # The first attempt fails; its partition is held, and the probe would go after the lease ended.
    mock_cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * 3)
    await agent.send(agent.item(**connector("c")), lease_ms=300)
    # The stopping worker's final request reaches the sidecar only after its lease (the sidecar hung meanwhile): the
    # agent got no answer, left through the fence and wrote the key through Connect; the sidecar must not own it now.
    await agent.send(final=True, lease_ms=300, sent_at_ms=int(time.time() * 1000) - 5_000)
    assert store.commit_spool()
    assert store.spool.pending() == []
    await store.flush(WAIT)  # the held partition's probes go, and the write settles, unsent
    await store.read_your_writes(WAIT)
    assert b"status-connector-c" not in last_values(store)
    assert (await agent.settled(1))[1]["result"] == "expired"


async def test_the_server_says_which_instance_and_protocol_it_is(served: tuple[StatusStore, httpx.AsyncClient],
                                                                 mock_cluster: FaultyCluster) -> None:
    store, http = served
    info = (await http.get("/")).json()
    assert info["agent_protocol"] == 1
    assert info["status_topic"] == store.config.topic
    answer = await Agent(http, store).send()
    assert answer == {"instance": info["instance"], "accepted": [], "outcomes": []}


async def test_the_agents_updates_are_counted_once(served: tuple[StatusStore, httpx.AsyncClient]) -> None:
    store, http = served
    agent = Agent(http, store)
    update = agent.item(**task("c", 0))
    await agent.send(update, agent.item(**task("c", 1, "STOPPED")))
    await agent.send(update)  # sent again: not taken twice
    metrics = (await http.get("/metrics")).text
    assert 'status_agent_updates_total{result="pending"} 1.0' in metrics
    assert 'status_agent_updates_total{result="refused"} 1.0' in metrics
    assert "status_agent_sessions 1.0" in metrics


async def test_a_request_may_wait_for_its_sessions_outcomes(served: tuple[StatusStore, httpx.AsyncClient],
                                                            mock_cluster: FaultyCluster) -> None:
    # The agent's flush before a rebalance waits for every write it handed over: an answer that waits for them
    # saves it a poll per flush (found by bench.connect_outage's bursts: deleting connectors took the pod 1.49x the
    # stock worker's time, each revocation's flush waiting out a 50 ms poll).
    store, http = served
    agent = Agent(http, store)
    # Every Produce takes 100 ms: answered at once without wait_ms, and well within the 1 s wait with it (at 300 ms,
    # a suite at full load once got only one of the three outcomes within the second).
    mock_cluster.set_rtt(-1, 100)
    try:
        answer = await agent.send(agent.item(**task("c", 0)), agent.item(**task("c", 1)))
        assert answer["outcomes"] == []  # without wait_ms, an answer comes at once
        answer = await agent.send(agent.item(**task("c", 2)), wait_ms=1000)
        assert sorted(o["seq"] for o in answer["outcomes"]) == [1, 2, 3]
        assert {o["result"] for o in answer["outcomes"]} == {"written"}
        # Bounded: a write held past it does not hold the answer.
        mock_cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * 50)
        answer = await agent.send(agent.item(**task("c", 3)), wait_ms=200)
        assert answer["outcomes"] == []
        assert answer["accepted"] == [{"seq": 4, "result": "pending"}]
    finally:
        mock_cluster.set_rtt(-1, 0)
    response = await http.post("/agent/statuses", json={"agent": "agent-1", "wait_ms": 5000})
    assert response.status_code == 422
    assert "wait_ms" in response.json()["message"]


async def test_a_request_meant_for_another_instance_takes_nothing(
        served: tuple[StatusStore, httpx.AsyncClient]) -> None:
    # An agent that spoke to an instance now gone (or still terminating beside this one) must learn of the new one
    # before this one takes any of its writes: the old one may still write what it took of the session.
    store, http = served
    info = (await http.get("/")).json()
    agent = Agent(http, store)
    body = {"agent": agent.name, "instance": "an-older-instance", "updates": [agent.item(**task("c", 0))]}
    response = await http.post("/agent/statuses", json=body)
    assert response.status_code == 409
    assert info["instance"] in response.json()["message"]
    assert store.queue.unsettled == 0
    answer = await agent.send(agent.item(**task("c", 0)), instance=info["instance"])
    assert answer["accepted"] == [{"seq": 2, "result": "pending"}]


async def test_a_sessions_expired_writes_hold_back_no_other_write(served: tuple[StatusStore, httpx.AsyncClient],
                                                                   mock_cluster: FaultyCluster) -> None:
    # Every partition held, then some found with nothing but expired writes in their line: those open, and the others,
    # which waited for the cluster's probe, waited (18 s here) for an unrelated write until each got a probe of its own.
    store, http = served
    mock_cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * 10_000)
    leaving, staying = Agent(http, store, "leaving"), Agent(http, store, "staying")
    await leaving.send(*[leaving.item(**task("a", n)) for n in range(3)], lease_ms=100)
    await staying.send(*[staying.item(**task("b", n)) for n in range(3)], lease_ms=60_000)
    # The first agent's lease ends (it writes through Connect now): no state announces it, time passes.
    await asyncio.sleep(0.5)
    mock_cluster.clear_request_errors(FaultyCluster.PRODUCE)
    await staying.settled(1, 2, 3, timeout=5.0)
    assert {o["result"] for o in staying.outcomes.values()} == {"written"}, staying.outcomes
    assert len(staying.outcomes) == 3
    assert {o["result"] for o in (await leaving.settled(1, 2, 3)).values()} == {"expired"}


async def test_a_write_whose_attempt_failed_and_whose_generation_moved_is_the_agents_again(
        served: tuple[StatusStore, httpx.AsyncClient], mock_cluster: FaultyCluster) -> None:
    # The fault matrix's kafka-cut-20s-black-holed row (bench/fault_matrix.py): a pause's PAUSED (generation 15) failed
    # its first attempt (the sidecar cut off from Kafka), a rebalance moved the worker to generation 16 meanwhile, and
    # Connect's retry rule (per writer) abandoned it: "superseded", which the agent took as done, and the connector
    # stayed RUNNING in every view while the worker's own producer could write it. Connect's store drops it only when
    # its own attempt failed too: for the agent it was never written, and is its again (rule 5 asks the worker's
    # producer).
    store, http = served
    agent = Agent(http, store)
    mock_cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * 3)
    await agent.send(agent.item(**connector("p", "PAUSED", generation=15)),
                     agent.item(**task("other", 0, generation=16)))
    outcomes = await agent.settled(1, 2)
    assert outcomes[2]["result"] == "written"
    assert outcomes[1]["result"] == "expired"
    assert "generation moved" in outcomes[1]["reason"]
    assert "the agent's again" in outcomes[1]["reason"]
    await store.read_your_writes(WAIT)
    assert b"status-connector-p" not in last_values(store)


@pytest.mark.parametrize("served", [GIVES_UP_SOON], indirect=True)
async def test_a_write_given_up_after_a_retriable_error_is_the_agents_again(
        served: tuple[StatusStore, httpx.AsyncClient], mock_cluster: FaultyCluster) -> None:
    # The fault matrix's worker-killed-in-outage row (bench/fault_matrix.py): in a long outage the sidecar gave an
    # agent's write up after its retries ("no retries left after 2 attempt(s)", last error _MSG_TIMED_OUT) and answered
    # "failed", which the agent settled for good: the status was lost where a stock worker's store re-sends a write
    # that failed retriably until it lands. Given up after a retriable error, the write is the agent's again.
    store, http = served
    agent = Agent(http, store)
    mock_cluster.broker_down(-1)
    await agent.send(agent.item(**task("c", 0)))
    outcome = (await agent.settled(1))[1]
    assert outcome["result"] == "expired", outcome
    assert outcome["attempts"] == 2
    assert "no retries left after 2 attempt(s)" in outcome["reason"]
    assert "_MSG_TIMED_OUT" in outcome["reason"]
    assert "the agent's again" in outcome["reason"]
    # Kafka back, the agent's write sent again (a new seq) is written.
    mock_cluster.broker_up(-1)
    await agent.send(agent.item(**task("c", 0, "PAUSED")))
    assert (await agent.settled(2))[2]["result"] == "written"
    await store.read_your_writes(WAIT)
    assert last_values(store)[b"status-task-c-0"] == encode_status(State.PAUSED, "w1:8083", 3, None, UNVERSIONED)


@pytest.mark.parametrize("served", [GIVES_UP_SOON], indirect=True)
async def test_a_write_kafka_refused_for_good_has_failed(served: tuple[StatusStore, httpx.AsyncClient],
                                                         mock_cluster: FaultyCluster) -> None:
    # What Connect's own store drops too: its callback re-sends only a RetriableException.
    store, http = served
    agent = Agent(http, store)
    mock_cluster.push_request_errors(FaultyCluster.PRODUCE, TOPIC_AUTHORIZATION_FAILED)
    await agent.send(agent.item(**task("c", 0)))
    outcome = (await agent.settled(1))[1]
    assert outcome["result"] == "failed", outcome
    assert outcome["reason"] == "TOPIC_AUTHORIZATION_FAILED is not retriable"


def test_a_write_the_store_stopped_before_writing_is_the_agents_again() -> None:
    # The service stops the HTTP server before the store (service.py), so no agent is told of such a write: its
    # requests refused, it leaves through the fence. Were one told, the write is its again, not lost.
    outcome = Outcome("status-task-c-0", Result.FAILED, 1, "the store stopped before Kafka acknowledged the write",
                      stopped=True)
    body = outcome_body(7, outcome.key, outcome)
    assert body["result"] == "expired", body
    assert "the store stopped before Kafka acknowledged the write" in body["reason"]


async def test_a_wake_answers_whether_the_sessions_answers_stop_waiting(
        served: tuple[StatusStore, httpx.AsyncClient]) -> None:
    store, http = served
    agent = Agent(http, store)
    await agent.send(agent.item(**task("c", 0)))
    instance = (await http.get("/")).json()["instance"]

    async def wake(**body: Any) -> httpx.Response:
        return await http.post("/agent/wake", json=body)

    assert (await wake(agent="agent-1", instance=instance, seq=1)).json() == {"woken": False}  # taken already
    assert (await wake(agent="nobody", seq=7)).json() == {"woken": False}  # no session: none made
    assert (await http.get("/metrics")).text.count("status_agent_sessions 1.0") == 1
    response = await wake(agent="agent-1", instance=instance, seq=2)
    assert (response.status_code, response.json()) == (200, {"woken": True})
    response = await wake(agent="agent-1", instance="another", seq=2)
    assert response.status_code == 409
    assert "another" in response.json()["message"]
    response = await wake(agent="agent-1", seq=0)
    assert response.status_code == 422
    assert "seq" in response.json()["message"]


async def test_a_write_taken_by_a_request_that_arrives_after_its_own_lease_is_never_sent(
        served: tuple[StatusStore, httpx.AsyncClient]) -> None:
    # A request held on its way (or by a sidecar whose loop hung) past its own lease, which runs from when it was sent:
    # its agent got no answer within its deadline, left, and writes the request's keys through Connect after their
    # fence (that request's sending + lease.ms + the write bound + 1 s). The sidecar starts no write of a session after
    # its lease: one started on arrival here could land a write bound later, after Connect's newer write of the key.
    # Before, the write was sent at once: the lease was asked only before a retry or a write that waited.
    store, http = served
    agent = Agent(http, store)
    answer = await agent.send(agent.item(**connector("c")), lease_ms=1_000,
                              sent_at_ms=int(time.time() * 1000) - 5_000)
    assert answer["accepted"] == [{"seq": 1, "result": "pending"}]
    await store.flush(WAIT)
    await store.read_your_writes(WAIT)
    assert b"status-connector-c" not in last_values(store)
    assert store.queue.attempts_total == 0
    outcome = (await agent.settled(1))[1]
    assert outcome["result"] == "expired", outcome
    assert "the agent's again" in outcome["reason"]
