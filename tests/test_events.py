"""GET /events: status changes as Server-Sent Events, read with a real SSE client over HTTP on 127.0.0.1, and
the event hub's resumption rules on a cache fed records directly."""

from __future__ import annotations

import asyncio
import collections
import json
import re
import resource
import socket
import subprocess
import sys
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from prometheus_client import CollectorRegistry

from harness import free_port
from harness.events_storm import Probe, raise_open_files, sidecar_metrics, storm
from harness.faulty_cluster import FaultyCluster
from harness.service import Service
from status_store.api import create_app
from status_store.api.http_server import WRITE_STALL_TIMEOUT_S, http_config
from status_store.connect.cache import StatusCache, StatusRecord
from status_store.connect.model import ConnectorStatus, State, TaskId
from status_store.fleet.event import EventIdTooOld, parse_event_id, trace_excerpt
from status_store.fleet.events import FANOUT_PER_TURN, Ended, StatusEvents
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .helpers import eventually, eventually_awaited, eventually_value, write_raw

WAIT = 20.0


def status(state: str, worker_id: str = "w1:8083", generation: int = 1, trace: str | None = None) -> bytes:
    """A status value as a Connect worker writes it."""
    return json.dumps({"state": state, "trace": trace, "worker_id": worker_id, "generation": generation},
                      separators=(",", ":")).encode()


@dataclass
class Event:
    id: str | None
    name: str
    data: dict[str, Any]


class SseClient:
    """Reads a text/event-stream response: events, and comment lines (heartbeats) counted."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.comments: list[str] = []
        self._lines = response.aiter_lines()

    async def next_item(self) -> str | Event:
        """The next comment (its text) or event."""
        fields: dict[str, str] = {}
        async for line in self._lines:
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
                return self.comments[-1]
            if line:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
            elif fields:
                return Event(fields.get("id"), fields.get("event", "message"), json.loads(fields["data"]))
        raise AssertionError("the stream ended")

    async def next_event(self, timeout: float = WAIT) -> Event:
        async with asyncio.timeout(timeout):
            while not isinstance(item := await self.next_item(), Event):
                pass
            return item

    async def events(self, count: int) -> list[Event]:
        return [await self.next_event() for _ in range(count)]


@dataclass
class Served:
    store: StatusStore
    url: str
    app: Any

    def stream(self, http: httpx.AsyncClient, query: str = "", last_event_id: str | None = None,
               ) -> Any:
        headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
        return http.stream("GET", f"{self.url}/events{query}", headers=headers)

    @property
    def hub(self) -> StatusEvents:
        hub: StatusEvents = self.app.state.events
        return hub


ServedFactory = Callable[..., Any]


@pytest.fixture
def serve(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> ServedFactory:
    """A store on a fresh topic served by the real HTTP server on 127.0.0.1, with these settings."""

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def make(write_stall_timeout_s: float = WRITE_STALL_TIMEOUT_S, **settings: str) -> AsyncIterator[Served]:
        topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
        async with store_factory(mock_cluster.bootstrap_servers, topic, **settings) as store:
            app = create_app(store, CollectorRegistry())
            port = free_port()
            server = uvicorn.Server(http_config(app, "127.0.0.1", port, write_stall_timeout_s=write_stall_timeout_s))
            task = asyncio.create_task(server.serve())
            await eventually(lambda: server.started)
            try:
                yield Served(store, f"http://127.0.0.1:{port}", app)
            finally:
                app.state.events.close()
                server.should_exit = True
                await asyncio.wait_for(task, WAIT)

    return make


def http_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(WAIT))


async def test_changes_arrive_as_they_are_read(serve: ServedFactory) -> None:
    async with serve() as served, http_client() as http, served.stream(http) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        sse = SseClient(response)
        trace = "org.apache.kafka.connect.errors.ConnectException: boom\n\tat Foo.bar(Foo.java:1)"
        write_raw(served.store, (b"status-task-sink-0", status("FAILED", "w2:8083", 3, trace)))
        event = await sse.next_event()
        assert event.name == "status"
        assert {k: v for k, v in event.data.items() if k not in ("partition", "offset", "timestamp")} == {
            "connector": "sink", "kind": "task", "task": 0, "state": "FAILED", "worker_id": "w2:8083",
            "generation": 3, "trace": "org.apache.kafka.connect.errors.ConnectException: boom…",
            # Why it failed, from the whole trace (docs/operations.md "Failure classes"): nothing in it says.
            "failure": {"class": "unknown", "family": None, "cause": "ConnectException: boom",
                        "action": "Not a failure status-store knows: read the whole trace "
                                  "(GET /connectors/{name}/status). Restarted by default (sidecar.restart.classes)."}}
        assert event.id == f"{event.data['partition']}:{event.data['offset']}"
        await served.store.put(ConnectorStatus("sink", State.RUNNING, "w1:8083", 3)).result(WAIT)
        connector = await sse.next_event()
        assert (connector.data["kind"], connector.data["state"], connector.data["worker_id"]) == (
            "connector", "RUNNING", "w1:8083")
        write_raw(served.store, (b"status-task-sink-0", None))
        deleted = await sse.next_event()
        assert (deleted.name, deleted.data["kind"], deleted.data["task"]) == ("deleted", "task", 0)
        assert "state" not in deleted.data


async def test_a_connector_filter_gets_that_connector_only(serve: ServedFactory) -> None:
    async with serve() as served, http_client() as http, served.stream(http, "?connector=a") as response:
        sse = SseClient(response)
        write_raw(served.store, (b"status-task-b-0", status("RUNNING")), (b"status-connector-b", status("RUNNING")),
                  (b"status-task-a-1", status("FAILED")), (b"status-topic-t:connector-a",
                                                           b'{"topic":{"name":"t","connector":"a","task":1,'
                                                           b'"discoverTimestamp":5}}'))
        # Records of different keys may be on different partitions, read in any order.
        by_kind = {event.data["kind"]: event.data for event in await sse.events(2)}
        assert (by_kind["task"]["connector"], by_kind["task"]["task"], by_kind["task"]["state"]) == ("a", 1, "FAILED")
        assert (by_kind["topic"]["topic"], by_kind["topic"]["discover_timestamp"]) == ("t", 5)


async def test_reconnecting_with_last_event_id_loses_and_repeats_nothing(serve: ServedFactory) -> None:
    keys = [f"status-task-c-{n}".encode() for n in range(8)]
    async with serve() as served, http_client() as http:
        async with served.stream(http) as response:
            sse = SseClient(response)
            write_raw(served.store, *((key, status("RUNNING")) for key in keys[:3]))
            seen = await sse.events(3)
        # Disconnected: these are read meanwhile, on every partition.
        write_raw(served.store, *((key, status("FAILED")) for key in keys))
        await served.store.read_to_end(WAIT)
        async with served.stream(http, last_event_id=seen[-1].id) as response:
            assert response.status_code == 200
            sse = SseClient(response)
            missed = await sse.events(len(keys))
            write_raw(served.store, (keys[0], status("PAUSED")))
            live = await sse.next_event()
    # Keys on different partitions may be read in any order: each phase's events as a sorted list.
    got = [sorted((e.data["task"], e.data["state"]) for e in phase) for phase in (seen, missed, [live])]
    assert got == [[(n, "RUNNING") for n in range(3)], [(n, "FAILED") for n in range(8)], [(0, "PAUSED")]]
    ids = [e.id for e in [*seen, *missed, live]]
    assert len(set(ids)) == len(ids)


async def test_an_id_older_than_the_events_kept_is_refused_and_a_malformed_one_too(serve: ServedFactory) -> None:
    async with serve(**{"sidecar.events.buffer.max": "3"}) as served, http_client() as http:
        async with served.stream(http) as response:
            sse = SseClient(response)
            write_raw(served.store, (b"status-task-c-0", status("RUNNING")))
            first = await sse.next_event()
            write_raw(served.store, *((f"status-task-c-{n}".encode(), status("FAILED")) for n in range(5)))
            await sse.events(5)
        old = await http.get(f"{served.url}/events", headers={"Last-Event-ID": str(first.id)})
        assert old.status_code == 410
        assert old.json()["error_code"] == 410
        assert "no longer kept" in old.json()["message"]
        malformed = await http.get(f"{served.url}/events", headers={"Last-Event-ID": "yesterday"})
        assert (malformed.status_code, malformed.json()["error_code"]) == (400, 400)


async def test_heartbeats_come_while_nothing_changes(serve: ServedFactory) -> None:
    async with serve(**{"sidecar.events.heartbeat.ms": "50"}) as served, http_client() as http:
        async with served.stream(http) as response:
            sse = SseClient(response)
            async with asyncio.timeout(WAIT):
                while sse.comments.count("heartbeat") < 3:
                    assert isinstance(await sse.next_item(), str)
        assert sse.comments[0] == "subscribed"


# Events of a long name (shown cut, as every view shows it: a few hundred bytes each). A connection's buffers hold
# megabytes: thousands of events. Each batch is read back before the next (about 0.2 s), so batches are large; but
# within a subscriber's queue bound, which a client that keeps up must never pass.
LARGE_EVENTS_CONNECTOR = "c" * 30000
LARGE_EVENTS_PER_BATCH = 200
# At most this many events are written (the default sidecar.events.subscriber.queue.max).
LARGE_EVENTS_MAX = 20_000


def client_that_does_not_read(port: int) -> socket.socket:
    """A GET /events client with a small receive window that reads nothing: the server's writes to it soon wait."""
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.connect(("127.0.0.1", port))
    client.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return client


async def write_large_events_until(served: Served, done: Callable[[], bool], what: str) -> int:
    """Batches of ``LARGE_EVENTS_PER_BATCH`` task statuses (generation: the batch's number), each read back, until
    ``done()``; at most ``LARGE_EVENTS_MAX`` events (failing with ``what``). The batches written."""
    batch = 0
    while not done():
        assert batch * LARGE_EVENTS_PER_BATCH < LARGE_EVENTS_MAX, what
        # In a thread: the event loop (the reader, the streams) goes on while the producer flushes.
        await asyncio.to_thread(write_raw, served.store, *(
            (f"status-task-{LARGE_EVENTS_CONNECTOR}-{n}".encode(), status("FAILED", generation=batch))
            for n in range(LARGE_EVENTS_PER_BATCH)))
        await served.store.read_to_end(WAIT)
        batch += 1
    return batch


async def test_a_slow_subscriber_is_dropped_while_the_store_and_the_others_go_on(serve: ServedFactory) -> None:
    connector, per_batch = LARGE_EVENTS_CONNECTOR, LARGE_EVENTS_PER_BATCH
    # Room for a few batches: the client that keeps up stays within it, the one that does not read soon passes it.
    queue_max = 5 * per_batch
    async with serve(**{"sidecar.events.subscriber.queue.max": str(queue_max)}) as served, http_client() as http:
        slow = client_that_does_not_read(int(served.url.rsplit(":", 1)[1]))
        try:
            await eventually(lambda: served.hub.subscribers == 1)
            async with served.stream(http) as response:
                sse = SseClient(response)
                await eventually(lambda: served.hub.subscribers == 2)
                received: list[Event] = []

                async def keep_up() -> None:
                    while True:
                        received.append(await sse.next_event())

                reading = asyncio.create_task(keep_up())
                batch = await write_large_events_until(served, lambda: served.hub.dropped > 0,
                                                       "the client that does not read was never dropped")
                # The store went on: it read every record; the client that keeps up got every event.
                last = served.store.cache.get_task(TaskId(connector, per_batch - 1))
                assert last is not None
                assert last.generation == batch - 1
                await eventually(lambda: len(received) == batch * per_batch)
                reading.cancel()
                assert served.hub.subscribers == 1
            assert [e.data["generation"] for e in received] == [g for g in range(batch) for _ in range(per_batch)]
            # The dropped client's connection is closed: it reads what was sent, then the end (in a thread: the
            # server flushes what it had buffered meanwhile).
            slow.settimeout(WAIT)
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            assert await asyncio.to_thread(read_to_close, slow)
        finally:
            slow.close()


async def test_a_lone_surrogate_is_escaped_and_ends_no_stream_nor_a_resumption(serve: ServedFactory) -> None:
    # Connect can write one itself: a Java message cut inside an emoji, written by Jackson as an escape.
    bad = rb'{"state":"FAILED","trace":"Cut inside an emoji \ud83d\n\tat x","worker_id":"w\ud800","generation":1}'
    key = b"status-task-c-0"  # one key: one partition, so the records are read in the order written
    async with serve() as served, http_client() as http:
        async with served.stream(http) as response:
            sse = SseClient(response)
            write_raw(served.store, (key, status("RUNNING")))
            before = await sse.next_event()
            write_raw(served.store, (key, bad), (key, status("PAUSED")))
            escaped, after = await sse.events(2)
        assert (escaped.data["worker_id"], escaped.data["trace"]) == ("w\ud800", "Cut inside an emoji \ud83d…")
        assert after.data["state"] == "PAUSED"
        async with served.stream(http, last_event_id=before.id) as response:
            assert response.status_code == 200
            resumed = await SseClient(response).events(2)
        assert [e.data["state"] for e in resumed] == ["FAILED", "PAUSED"]


async def test_the_fan_out_in_one_turn_of_the_event_loop_is_bounded(serve: ServedFactory,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    subscribers, events = 3 * FANOUT_PER_TURN, 500
    async with serve() as served:
        port = int(served.url.rsplit(":", 1)[1])
        clients = [SseCounter(*await asyncio.open_connection("127.0.0.1", port)) for _ in range(subscribers)]
        await eventually(lambda: served.hub.subscribers == subscribers)
        await eventually(lambda: all(client.frames == 1 for client in clients))  # ": subscribed"
        # Turns are counted by the loop's own step (``_run_once``, one per turn). A callback that counts and schedules
        # itself again, as this test did, runs at a place among a turn's callbacks that varies: two turns' writes fell
        # between two of its counts now and then.
        loop = asyncio.get_running_loop()
        turn, turns_of_takes = [0], []
        run_once = loop._run_once  # type: ignore[attr-defined]

        def counted_turn() -> None:
            turn[0] += 1
            run_once()

        take = served.hub.take

        def counted_take(subscription: Any) -> Any:
            taken = take(subscription)
            if taken:
                turns_of_takes.append(turn[0])
            return taken

        monkeypatch.setattr(served.hub, "take", counted_take)
        monkeypatch.setattr(loop, "_run_once", counted_turn)
        try:
            await asyncio.to_thread(write_raw, served.store, *((f"status-task-c-{n}".encode(), status("RUNNING"))
                                                               for n in range(events)))
            await eventually(lambda: all(client.frames == 1 + events for client in clients))
        finally:
            monkeypatch.setattr(loop, "_run_once", run_once)
            for client in clients:
                client.close()
    # Every client got every event, and the hub gave at most FANOUT_PER_TURN of them their turn per turn of the event
    # loop: a subscriber takes its chunk one turn after its turn was given when it awaited it alone, two when it waited
    # with a timeout (``asyncio.wait``), so one turn can see one turn's takes of each kind: twice the bound at most (all
    # 48 at once without it).
    assert max(collections.Counter(turns_of_takes).values()) <= 2 * FANOUT_PER_TURN


class SseCounter:
    """A client of GET /events on a plain connection that reads everything and counts the frames (comments too)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.frames = 0
        self._writer = writer
        writer.write(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self._reading = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        await reader.readuntil(b"\r\n\r\n")
        tail = b""
        while chunk := await reader.read(1 << 16):
            self.frames += (tail + chunk).count(b"\n\n") - tail.count(b"\n\n")
            tail = chunk[-1:]

    def close(self) -> None:
        self._reading.cancel()
        self._writer.close()


async def test_past_the_subscriber_bound_a_stream_is_refused_and_short_requests_are_still_answered(
        serve: ServedFactory) -> None:
    async with serve(**{"sidecar.events.subscribers.max": "3"}) as served, http_client() as http:
        port = int(served.url.rsplit(":", 1)[1])
        streams = [SseCounter(*await asyncio.open_connection("127.0.0.1", port)) for _ in range(3)]
        try:
            await eventually(lambda: served.hub.subscribers == 3)
            refused = await http.get(f"{served.url}/events")
            assert refused.status_code == 503
            assert refused.json() == {"error_code": 503, "message": refused.json()["message"]}
            assert "sidecar.events.subscribers.max" in refused.json()["message"]
            assert int(refused.headers["retry-after"]) > 0
            assert refused.headers["connection"] == "close"
            # The probes and the writes are answered while the streams are at their bound.
            assert (await http.get(f"{served.url}/health")).status_code == 200
            written = await http.put(f"{served.url}/connectors/c/status", params={"wait": "true"},
                                     json={"state": "RUNNING", "worker_id": "w:1", "generation": 1})
            assert written.status_code == 200
            await eventually(lambda: all(stream.frames == 2 for stream in streams))  # subscribed, and the write
            assert "status_events_refused_total 1.0" in (await http.get(f"{served.url}/metrics")).text
            # A stream that ends makes room for another.
            streams.pop().close()
            await eventually(lambda: served.hub.subscribers == 2)
            async with served.stream(http) as response:
                assert response.status_code == 200
        finally:
            for stream in streams:
                stream.close()


async def test_clients_that_never_read_give_their_slots_to_a_new_client_and_end_at_their_time_bound(
        serve: ServedFactory) -> None:
    """100 idle clients held every slot for ever (their heartbeats fit in the kernel's buffers): the status page got
    503. Now the one connected longest gives its place once it has had a fifth of a stream's life, and every stream
    ends at its time bound, asking its client to reconnect."""
    settings = {"sidecar.events.subscribers.max": "3", "sidecar.events.stream.max.ms": "3000"}
    async with serve(**settings) as served, http_client() as http:
        idle = [client_that_does_not_read(int(served.url.rsplit(":", 1)[1])) for _ in range(3)]
        try:
            await eventually(lambda: served.hub.subscribers == 3)

            async def new_client() -> str | Event | int:
                """A new client's first event, or the status it was refused with."""
                async with served.stream(http) as response:
                    if response.status_code == 200:
                        return await SseClient(response).next_item()
                    return response.status_code

            # Refused (503) until the longest connected has had a fifth of a stream's life.
            first = await eventually_awaited(new_client, lambda answer: answer != 503, timeout=WAIT, interval=0.1,
                                             what="a new client's answer")
            assert first == "subscribed"
            assert served.hub.replaced == 1
            # The other two end at their bound; each connection is closed after its last event.
            await eventually(lambda: served.hub.expired >= 2)
            for client in idle:
                client.settimeout(WAIT)
                tail = await asyncio.to_thread(read_everything, client)
                assert tail.endswith(b'reconnect with the id of the last event received"}\n\n\r\n0\r\n\r\n')
            text = (await http.get(f"{served.url}/metrics")).text
            assert "status_events_replaced_total 1.0" in text
        finally:
            for client in idle:
                client.close()


def read_everything(connection: socket.socket) -> bytes:
    """What the peer sends until it closes."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received


async def test_a_client_whose_connection_stops_draining_is_let_go_before_it_falls_behind(
        serve: ServedFactory) -> None:
    async with serve(write_stall_timeout_s=0.5) as served:
        stalled = client_that_does_not_read(int(served.url.rsplit(":", 1)[1]))
        try:
            await eventually(lambda: served.hub.subscribers == 1)
            batch = await write_large_events_until(served, lambda: served.hub.subscribers == 0,
                                                   "the client that does not read was never let go")
            # Let go for its connection, long before its queue (sidecar.events.subscriber.queue.max) was full.
            assert batch * LARGE_EVENTS_PER_BATCH < served.store.config.events_subscriber_queue_max
            assert served.hub.dropped == 0
            response = await httpx.AsyncClient(base_url=served.url).get("/metrics")
            assert 'http_connections_closed_total{reason="stalled"} 1.0' in response.text
            # The connection was aborted: what the kernel holds for the client, then a reset, not the data waiting.
            stalled.settimeout(WAIT)
            with pytest.raises(ConnectionResetError):
                await asyncio.to_thread(read_to_close, stalled)
        finally:
            stalled.close()


async def test_a_subscriber_further_behind_than_the_bytes_bound_is_dropped() -> None:
    cache = StatusCache()
    hub = StatusEvents(cache, buffer_max=1000, queue_max=1000, from_start=True, buffer_max_bytes=1_000_000)
    subscription = hub.subscribe()
    # 20 events of ~200 KB: 4 MB wait for it, 20 events of the 1,000 its queue may hold.
    cache.apply(record(f"status-task-c-{n}", status("RUNNING", "w" * 100_000), 0, n) for n in range(20))
    await asyncio.sleep(0)
    assert subscription.reason is Ended.DROPPED
    assert hub.dropped == 1
    assert hub.subscribers == 0


def read_to_close(connection: socket.socket) -> bool:
    """Read until the peer closes (True); a timeout raises."""
    while connection.recv(65536):
        pass
    return True


# ------------------------------------------------------------------------------------------------ the hub alone


def record(key: str, value: bytes | None, partition: int, offset: int) -> StatusRecord:
    return StatusRecord(key.encode(), value, partition, offset, 1.0)


def test_an_id_resumes_on_a_new_process_that_kept_events_from_the_start() -> None:
    records = [record(f"status-task-c-{n}", status("RUNNING"), n % 2, n // 2) for n in range(6)]
    first_cache = StatusCache()
    first = StatusEvents(first_cache, buffer_max=100, queue_max=100, from_start=True)
    subscription = first.subscribe()
    first_cache.apply(records[:3])
    delivered = first.take(subscription)
    assert len(delivered) == 3
    # A restart: the new process reads the topic from its start again, and then what came meanwhile.
    cache = StatusCache()
    again = StatusEvents(cache, buffer_max=100, queue_max=100, from_start=True)
    cache.apply(records)
    resumed = again.subscribe(last_event_id=delivered[-1].id)
    assert [(e.partition, e.offset) for e in resumed.backlog] == [(r.partition, r.offset) for r in records[3:]]


def test_a_hub_attached_late_refuses_partitions_it_has_not_read() -> None:
    cache = StatusCache()
    cache.apply([record("status-task-c-0", status("RUNNING"), 0, 0),
                 record("status-task-c-1", status("RUNNING"), 1, 0)])
    late = StatusEvents(cache, buffer_max=100, queue_max=100, from_start=False)
    cache.apply([record("status-task-c-0", status("FAILED"), 0, 4)])
    assert late.subscribe(last_event_id="0:3").backlog[0].offset == 4
    with pytest.raises(EventIdTooOld, match="partition 0"):
        late.subscribe(last_event_id="0:2")  # offset 3 may hold a record read before the hub was there
    with pytest.raises(EventIdTooOld, match="partition 1"):
        late.subscribe(last_event_id="0:4,1:0")


def test_a_last_event_id_naming_a_partition_twice_or_one_not_read_is_malformed() -> None:
    cache = StatusCache()
    hub = StatusEvents(cache, buffer_max=100, queue_max=100, from_start=True)
    cache.apply([record("status-task-c-0", status("RUNNING"), 0, 0),
                 record("status-task-c-1", status("RUNNING"), 1, 0)])
    assert hub.subscribe(last_event_id="0:0,1:0").backlog == []
    for malformed, why in (("0:0,1:0,0:5", "partition 0 is named twice"), ("00:0,0:1", "partition 0 is named twice"),
                           ("0:0,7:3", "partition 7 has no record read"), ("\u0660:0", "not an event id"),
                           ("0:0, 1:0", "not an event id")):
        with pytest.raises(ValueError, match=why):
            hub.subscribe(last_event_id=malformed)
    assert hub.subscribers == 1


def test_a_last_event_id_past_what_a_partition_has_read_is_malformed() -> None:
    """An id beyond what the stream read of a partition (another topic's, one deleted and made again, or made up) would
    skip that partition's events up to its offset: it is refused (400), on a hub kept from the start and on one
    attached late alike."""
    for from_start in (True, False):
        cache = StatusCache()
        hub = StatusEvents(cache, buffer_max=100, queue_max=100, from_start=from_start)
        cache.apply([record("status-task-c-0", status("RUNNING"), 0, 0),
                     record("status-task-c-1", status("RUNNING"), 1, 0),
                     record("status-task-c-1", status("FAILED"), 1, 1)])
        with pytest.raises(ValueError, match="partition 1 has no record read past offset 1"):
            hub.subscribe(last_event_id="0:0,1:7")
        if from_start:
            assert [(e.partition, e.offset) for e in hub.subscribe(last_event_id="0:0,1:0").backlog] == [(1, 1)]


async def test_an_empty_last_event_id_is_refused_not_read_as_none(serve: ServedFactory) -> None:
    async with serve() as served:
        host, port = served.url.removeprefix("http://").split(":")
        for blank in (b"", b"   "):  # the server strips the spaces: both arrive empty
            reader, writer = await asyncio.open_connection(host, int(port))
            head = b"GET /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\nLast-Event-ID:"
            writer.write(head + blank + b"\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), WAIT)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 400 "), answer
            assert answer.endswith(b'"Invalid Last-Event-ID: empty (leave the header out to subscribe from now)"}')


def test_records_the_cache_ignores_or_reads_again_are_no_events() -> None:
    cache = StatusCache()
    hub = StatusEvents(cache, buffer_max=100, queue_max=100, from_start=True)
    subscription = hub.subscribe()
    cache.apply([record("status-task-c-0", status("RUNNING", generation=2), 0, 0),
                 record("status-task-c-0", status("UNASSIGNED", generation=1), 0, 1),  # stale: ignored
                 record("status-task-c-0", b"{not json", 0, 2),  # garbled: discarded
                 record("status-task-c-0", status("RUNNING", generation=2), 0, 0)])  # read again
    assert len(hub.take(subscription)) == 1


def large_trace_records(count: int, trace_chars: int) -> Iterator[StatusRecord]:
    """Task statuses of one key, each with a trace of ``trace_chars`` characters, made as they are read (the reader
    hands records over and keeps none)."""
    for n in range(count):
        value = (b'{"state":"FAILED","trace":"' + b"x" * trace_chars + b'\\n\\tat y","worker_id":"w1:8083",'
                 b'"generation":' + str(n).encode() + b"}")
        yield record("status-task-c-0", value, 0, n)


def test_events_keep_what_they_send_not_the_values_read_also_when_rebuilt_from_the_topic() -> None:
    cache = StatusCache()
    # As at every start: the hub is there before the topic is read from its beginning.
    hub = StatusEvents(cache, buffer_max=1000, queue_max=1000, from_start=True)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache.apply(large_trace_records(100, 1_000_000))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # The cache holds the key's last value (1 MB); 100 events hold their excerpts, not 100 MB of values.
    assert held < 5_000_000
    resumed = hub.subscribe(last_event_id="0:97")
    assert [json.loads(e.frame().split(b"data: ")[1])["trace"] for e in resumed.backlog] == ["x" * 200 + "…"] * 2


def test_the_events_kept_are_bounded_in_bytes_too() -> None:
    cache = StatusCache()
    hub = StatusEvents(cache, buffer_max=1000, queue_max=1000, from_start=True, buffer_max_bytes=2_000_000)
    long_worker = "w" * 100_000
    cache.apply(record(f"status-task-c-{n}", status("RUNNING", long_worker), 0, n) for n in range(100))
    assert hub.kept_bytes <= 2_000_000
    # An event of ~200 KB (its worker id, in the event and in its frame): about ten are kept, not a hundred.
    assert len(hub.subscribe(last_event_id="0:94").backlog) == 5
    with pytest.raises(EventIdTooOld, match="no longer kept"):
        hub.subscribe(last_event_id="0:79")


async def test_events_handed_to_subscribers_stay_kept_for_resumption() -> None:
    cache = StatusCache()
    hub = StatusEvents(cache, buffer_max=10_000, queue_max=10_000, from_start=True)
    subscription = hub.subscribe()
    for batch in range(10):
        cache.apply(record(f"status-task-c-{n}", status("RUNNING"), 0, batch * 1000 + n) for n in range(1000))
        await asyncio.sleep(0)  # the hub's pass over its subscribers
        while hub.take(subscription):
            pass
    assert len(hub.subscribe(last_event_id="0:0").backlog) == 9_999


def test_event_ids_and_trace_excerpts() -> None:
    assert parse_event_id("0:12,3:-1") == {0: 12, 3: -1}
    for malformed in ("", "0:", "a:1", "0:1,", "0:1;1:2", "0:-2"):
        with pytest.raises(ValueError, match="not an event id"):
            parse_event_id(malformed)
    assert trace_excerpt(None) is None
    assert trace_excerpt("one line") == "one line"
    assert trace_excerpt("first\nsecond") == "first…"
    assert trace_excerpt("x" * 300) == "x" * 200 + "…"


# ------------------------------------------------------------------------------------------------ the service


def subscribers(metrics: str) -> list[str]:
    """The value of ``status_events_subscribers`` in a scrape (as many as the scrape has lines of it)."""
    return [line.split()[-1] for line in metrics.splitlines() if line.startswith("status_events_subscribers ")]


def test_watch_prints_each_change_and_the_service_stops_with_streams_open() -> None:
    """``status-store watch`` against ``status-store serve``: a line per change of its connector; SIGTERM ends the
    streams (uvicorn would wait for them forever), the service and the watch exit."""
    watcher: subprocess.Popen[str] | None = None
    with Service("--port", str(free_port())) as service:
        try:
            running = service.wait_for("Uvicorn running on")
            url = running.split("Uvicorn running on ", 1)[1].split()[0]
            watcher = subprocess.Popen([sys.executable, "-m", "status_store.cli", "watch", "sink", "--url", url],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            with httpx.Client(base_url=url, timeout=WAIT) as http:
                eventually_value(lambda: subscribers(http.get("/metrics").text), lambda count: count == ["1.0"],
                                 timeout=WAIT, interval=0.05, what="the subscribers the service counts (the watch's)")
                for path, body in (("/connectors/other/status",
                                    {"state": "RUNNING", "worker_id": "w:1", "generation": 1}),
                                   ("/connectors/sink/tasks/0/status",
                                    {"state": "FAILED", "worker_id": "w:2", "generation": 4, "trace": "Boom\n\tat x"})):
                    assert http.put(path, params={"wait": "true"}, json=body).status_code == 200
            assert watcher.stdout is not None
            line = watcher.stdout.readline()
            assert re.fullmatch(
                r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  task sink/0  FAILED  worker w:2  generation 4  Boom…\n", line), line
            assert service.stop() == 0
            assert watcher.wait(WAIT) == 0
            assert watcher.stdout.read() == ""
            assert "the server is stopping" in (watcher.stderr.read() if watcher.stderr else "")
        finally:
            if watcher is not None and watcher.poll() is None:
                watcher.kill()


async def test_a_client_that_goes_away_is_unsubscribed(serve: ServedFactory) -> None:
    async with serve() as served, http_client() as http:
        async with served.stream(http) as response:
            sse = SseClient(response)
            assert await sse.next_item() == "subscribed"
            assert served.hub.subscribers == 1
        await eventually(lambda: served.hub.subscribers == 0)


STORM_STREAMS = 2000
# The sidecar's limit of open files: room for the connection limit (1,000) and the Kafka clients.
STORM_NOFILE = 4096


@pytest.mark.timeout(300)
def test_two_thousand_event_streams_leave_the_probes_and_the_writes_answered() -> None:
    """2,000 clients of GET /events at once against ``status-store serve`` (every other one never reads), then a
    write batch while the subscribed ones stay, /health probed throughout on a new connection each time: the
    streams past the bound are refused (503, Retry-After), every probe and every write is answered."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = STORM_STREAMS + 1024
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"this process may open {hard} files at most; the test needs {needed}")
    raise_open_files(needed)
    with Service("--port", str(free_port()), nofile=STORM_NOFILE) as service:
        try:
            url = service.wait_for("Uvicorn running on").split("Uvicorn running on ", 1)[1].split()[0]
            port = int(url.rsplit(":", 1)[1])
            probe = Probe(port)
            try:
                result = asyncio.run(storm(port, STORM_STREAMS, updates=2000, batch=200, generation=1))
            finally:
                probes = probe.stop()
            counted = asyncio.run(sidecar_metrics(port))
            assert service.stop() == 0
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    # /health answered throughout, the writes accepted and durable.
    assert len(probes) > 10
    # A probe not answered says when it started (from the storm's start) and how long it waited.
    assert [status for _, status, _ in probes if status != 200] == [], [
        (round(started - result.began, 1), status, round(seconds, 1))
        for started, status, seconds in probes if status != 200]
    assert result.writes.statuses == [200] * 10
    # As many subscribed as the bound allows; the others refused with a time to come back, or shed at the
    # connection limit before their request was read (a connection limit that holds).
    bound = 100
    assert result.count(200) == bound
    assert {s.status for s in result.streams} <= {200, 503, 0}
    assert all(s.retry_after for s in result.streams if s.status == 503)
    assert result.count(503) == counted["status_events_refused_total"]
    unanswered = collections.Counter(s.error for s in result.streams if s.status == 0)
    assert result.count(0) <= counted['http_connections_closed_total{reason="connection_limit"}'], (unanswered, counted)
    # The subscribers that read got the write batch's events.
    assert all(s.frames > 1 for s in result.streams if s.status == 200 and s.reading)
