"""Records written straight into a live Connect 4.4.0 cluster's status and config topics with a plain producer (as
a foreign writer, compaction or a write cut half-way leaves them), and the worker's REST answers to them beside the
sidecar's: the same status code and JSON, but for the differences docs/compatibility.md names. The rules the unit
tests check on our reader alone (tests/test_model.py, tests/test_config_topic.py) are asked of the real worker here.

A configuration record makes the workers act: every connector here is written after a target state that keeps it
from running (PAUSED or STOPPED), so the worker never writes task configurations of its own over the ones written
here. Its tasks fail on start (the task configurations name no ``task.class``), which changes nothing else. Every
connector is deleted through the worker's REST API, and every status key written is tombstoned, before a test ends:
the tests after these share the cluster (tests/test_connect_oracle.py lists every connector). The records stay in
the topics, marked with ``FOREIGN_WRITER_HEADER``: a test of the records Connect writes leaves them out.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.java_process import FOREIGN_WRITER_HEADER, SOURCE_CONNECTOR, wait_until
from harness.real_connect import ConnectCluster, states
from harness.sidecar import LiveSidecar

from .connect_records import Record, commit, connector_config, target_state, task_config
from .test_connect_live import same_answers

pytestmark = pytest.mark.timeout(300)
WAIT = 60.0
BOM = b"\xef\xbb\xbf"
# What the workers record for a task configuration without a class: each task fails on start.
NO_TASK_CLASS = 'Missing required configuration "task.class"'


def held(connector: str, tasks: int) -> dict[str, str]:
    """A configuration of the scripted source connector (a class the workers have, so that its type is ``source`` on
    both sides) with room for ``tasks`` tasks."""
    return {"connector.class": SOURCE_CONNECTOR, "name": connector, "tasks.max": str(tasks)}


def status_value(worker_id: str) -> bytes:
    """A RUNNING status as Connect 3.x writes it, its worker id naming the key it was written under."""
    return json.dumps({"state": "RUNNING", "trace": None, "worker_id": worker_id, "generation": 0},
                      separators=(",", ":"), ensure_ascii=False).encode()


def routes(connector: str) -> list[str]:
    """The configuration routes of one connector, its status, and the listings that hold it."""
    base = f"/connectors/{connector}"
    return ["/connectors?expand=info", "/connectors?expand=status", base, f"{base}/config", f"{base}/tasks",
            f"{base}/status"]


@dataclass
class Records:
    """Writes records into the cluster's topics, remembers what it wrote, and removes it all afterwards."""

    connect: ConnectCluster
    sidecar: LiveSidecar
    configured: list[str] = field(default_factory=list)
    status_keys: list[str] = field(default_factory=list)

    def config(self, *records: Record) -> None:
        """Config topic records, in order (the topic has one partition)."""
        self.configured += [key.removeprefix("connector-") for key, _ in records if key.startswith("connector-")]
        self._write(self.connect.config_topic, records)

    def status(self, *keys: str) -> None:
        """A RUNNING status under each key, in order."""
        self.status_keys += keys
        self._write(self.connect.status_topic, [(key, status_value(key)) for key in keys])

    def statuses_read(self, connector: str, keys: Iterable[str], condition: Callable[[dict[str, Any]], bool],
                      what: str) -> dict[str, Any]:
        """Write ``keys`` (``status``) and wait until Connect answers ``connector``'s status as ``condition`` accepts.

        No connector written so is in the config topic, and after each rebalance Connect's leader tombstones the
        statuses of every connector the config topic does not hold (``DistributedHerder.updateDeletedConnectorStatus``):
        a rebalance right after the write (a connector the test before deleted) takes them away, on both sides. Then
        they are written again, up to three writes in all (it failed a CI run once)."""
        keys = list(keys)
        deleted = (f"status-connector-{connector}".encode(), None)

        def deletions() -> int:
            return self.connect.kafka.records(self.connect.status_topic, foreign=False).count(deleted)

        for _ in range(3):
            before = deletions()
            self.status(*keys)
            try:
                return self.connect.wait_for_status(connector, condition, what, WAIT)
            except TimeoutError:
                if deletions() == before:
                    raise
        raise TimeoutError(f"Connect deleted the statuses of {connector} after each of three writes")

    def _write(self, topic: str, records: Iterable[Record]) -> None:
        # One partition: records are read in the order written (a status tombstone after its status, a commit
        # after its tasks' configurations). The header tells a test of what Connect wrote that these are not.
        failed: list[object] = []
        producer = Producer({"bootstrap.servers": self.connect.kafka.bootstrap_servers})
        for key, value in records:
            producer.produce(topic, value, key.encode(), partition=0, headers=[(FOREIGN_WRITER_HEADER, __name__)],
                             on_delivery=lambda error, _: failed.append(error) if error is not None else None)
        assert producer.flush(WAIT) == 0
        assert not failed, failed

    def listings(self) -> tuple[list[str] | None, list[str] | None]:
        """``GET /connectors`` of Connect (sorted: it lists in hash order, the sidecar sorted, as docs/compatibility.md
        says) and of the sidecar; None for an answer that is not 200 (a worker answers 500 while a rebalance it
        expects is under way)."""
        theirs, ours = self.connect.request("GET", "/connectors"), self.sidecar.request("GET", "/connectors")
        return (sorted(theirs.json()) if theirs.status == 200 else None, ours.json() if ours.status == 200 else None)

    def listed(self) -> list[str]:
        """The connectors both sides list, once they list the same."""
        listed: list[str] = []

        def same() -> bool:
            theirs, ours = self.listings()
            listed[:] = ours or []
            return theirs is not None and theirs == ours

        wait_until(same, WAIT, "both sides list the same connectors", interval=0.3)
        return listed

    def _deleted(self, connector: str) -> bool:
        """Whether Connect answers a DELETE of the connector with done or unknown (not 500 during a rebalance)."""
        return self.connect.request("DELETE", f"/connectors/{connector}").status in (204, 404)

    def remove(self) -> None:
        """Delete every connector through the worker, tombstone every status key, and wait until neither side
        knows any of them."""
        for connector in self.configured:
            wait_until(functools.partial(self._deleted, connector), WAIT, f"{connector} deleted", interval=0.3)
        self._write(self.connect.status_topic, [(key, None) for key in self.status_keys])
        prefix = "status-connector-"
        named = {*self.configured, *(key.removeprefix(prefix) for key in self.status_keys if key.startswith(prefix))}

        def gone() -> bool:
            theirs, ours = self.listings()
            return theirs is not None and ours is not None and not named & {*theirs, *ours} and all(
                side.request("GET", f"/connectors/{name}/status").status == 404
                for side in (self.connect, self.sidecar) for name in named)

        wait_until(gone, WAIT, f"{sorted(named)} deleted on both sides", interval=0.3)


@pytest.fixture
def records(connect_cluster: ConnectCluster, connect_sidecar: LiveSidecar) -> Iterator[Records]:
    written = Records(connect_cluster, connect_sidecar)
    try:
        yield written
    finally:
        written.remove()


def tasks_failed(target: str, count: int) -> Callable[[dict[str, Any]], bool]:
    """A condition: the connector held in ``target``'s state, and ``count`` tasks that failed for want of a class."""
    def condition(status: dict[str, Any]) -> bool:
        return (states(status) == (target, ["FAILED"] * count)
                and all(NO_TASK_CLASS in task.get("trace", "") for task in status["tasks"]))
    return condition


def task_configs_shown(connect: ConnectCluster, connector: str, expected: list[Any]) -> None:
    """Wait until Connect's ``/tasks`` answers the task configurations ``expected`` (a worker answers 500 while a
    rebalance it expects is under way)."""
    shown: list[Any] = []

    def holds() -> bool:
        answer = connect.request("GET", f"/connectors/{connector}/tasks")
        shown[:] = [answer.status, answer.json()]
        return answer.status == 200 and [task["config"] for task in answer.json()] == expected

    try:
        wait_until(holds, WAIT, f"{connector}'s task configurations shown", interval=0.3)
    except TimeoutError:
        pytest.fail(f"Connect's /connectors/{connector}/tasks: {shown}, not the configurations {expected}")


# ----------------------------------------------------------------------------- the status topic


def test_status_task_numbers_are_read_as_connect_reads_them(records: Records) -> None:
    # Integer.parseInt: a '+', and decimal digits of any script of the Basic Multilingual Plane; a digit above U+FFFF
    # is two UTF-16 units, neither a digit, and an int overflow is no number: both keys are discarded.
    read = {"status-task-rec-keys-0": 0, "status-task-rec-keys-\u0661": 1, "status-task-rec-keys-+7": 7,
            "status-task-rec-keys-\uff11\uff12": 12, "status-task-rec-keys-2147483647": 2147483647}
    discarded = ["status-task-rec-keys-\U0001d7cf", "status-task-rec-keys-1\U0001d7cf",
                 "status-task-rec-keys-2147483648"]
    connect = records.connect
    shown = records.statuses_read("rec-keys", ["status-connector-rec-keys", *read, *discarded],
                                  lambda status: len(status["tasks"]) == len(read), "tasks read")
    assert {task["id"]: task["worker_id"] for task in shown["tasks"]} == {task: key for key, task in read.items()}
    same_answers(connect.request, records.sidecar.request, [
        "/connectors/rec-keys/status", *(f"/connectors/rec-keys/tasks/{task}/status" for task in (*read.values(), 2))])


def test_a_task_key_with_an_empty_connector_changes_no_answer(records: Records) -> None:
    # Connect caches status-task--0 under the connector "" (docs/compatibility.md: "A task key with an empty
    # connector"); the sidecar skips it. No route can name "": the paths that would are refused alike, and nothing
    # else shows the record. The marker after it (same partition) tells when Connect has read it.
    records.statuses_read("rec-empty", ["status-task--0", "status-task--1", "status-connector-rec-empty"],
                          lambda status: True, "the marker read")
    connect, sidecar = records.connect, records.sidecar
    for path in ("/connectors//status", "/connectors//tasks/0/status", "/connectors//config", "/connectors//"):
        theirs, ours = connect.request("GET", path), sidecar.request("GET", path)
        # Jetty answers its own body ({"message","url","status"}); the sidecar Connect's error body, same message.
        assert (ours.status, ours.json()["message"]) == (theirs.status, theirs.json()["message"]), path
        assert theirs.status == 400, path
    same_answers(connect.request, sidecar.request, [
        "/connectors?expand=status", "/connectors/rec-empty/status", "/connectors/rec-empty/tasks/0/status",
        "/connectors/-/status", "/connectors/-/tasks/0/status", "/connectors/%20/tasks/0/status"])


# ----------------------------------------------------------------------------- the config topic


def test_config_records_in_every_spelling_jacksons_reader_takes_are_applied_as_connect_applies_them(
        records: Records) -> None:
    # Connect's JsonConverter (Jackson, ALLOW_LEADING_ZEROS_FOR_NUMBERS) reads a UTF-8 byte order mark, UTF-16 with
    # or without one, and leading zeros. The target state comes first, in UTF-16 with a byte order mark: had the
    # worker not read it, it would have started the connector and written task configurations of its own.
    key, value = connector_config("rec-spell", held("rec-spell", 2))
    assert value is not None
    records.config(("target-state-rec-spell", '\ufeff{"state":"PAUSED"}'.encode("utf-16-be")), (key, BOM + value),
                   ("task-rec-spell-0", '{"properties":{"t":"0"}}'.encode("utf-16-le")),
                   ("task-rec-spell-1", '{"properties":{"t":"1"}}'.encode("utf-16")),
                   ("commit-rec-spell", b'{"tasks":02}'))
    connect = records.connect
    connect.wait_for_status("rec-spell", tasks_failed("PAUSED", 2), "paused, its tasks failed", WAIT)
    task_configs_shown(connect, "rec-spell", [{"t": "0"}, {"t": "1"}])
    same_answers(connect.request, records.sidecar.request, routes("rec-spell"))
    assert records.sidecar.call("GET", "/connectors/rec-spell/config") == held("rec-spell", 2)  # Connect's too
    assert "rec-spell" in records.listed()


def test_a_config_task_number_is_read_one_utf16_unit_at_a_time_as_javas_parse_int_reads_it(records: Records) -> None:
    # task-c-\u0661 is task 1 and task-c-+2 task 2; a digit above U+FFFF (written after the task it would replace,
    # were it read as a digit) is two surrogate units, neither a digit: the record is ignored.
    records.config(target_state("rec-digits", "STOPPED"), connector_config("rec-digits", held("rec-digits", 3)),
                   task_config("rec-digits", 0, {"t": "0"}),
                   ("task-rec-digits-\u0661", b'{"properties":{"t":"arabic 1"}}'),
                   ("task-rec-digits-+2", b'{"properties":{"t":"plus 2"}}'),
                   ("task-rec-digits-\U0001d7cf", b'{"properties":{"t":"mathematical 1"}}'),
                   ("task-rec-digits-\U0001d7d0", b'{"properties":{"t":"mathematical 2"}}'),
                   commit("rec-digits", 3))
    connect = records.connect
    connect.wait_for_status("rec-digits", tasks_failed("STOPPED", 3), "stopped, its tasks failed", WAIT)
    task_configs_shown(connect, "rec-digits", [{"t": "0"}, {"t": "arabic 1"}, {"t": "plus 2"}])
    same_answers(connect.request, records.sidecar.request, routes("rec-digits"))
    assert "rec-digits" in records.listed()


def test_a_commit_that_finds_task_configurations_missing_leaves_the_connector_without_tasks(records: Records) -> None:
    # A commit record claiming more tasks than configurations written (compaction, a leader that died half-way, a
    # foreign writer) makes the connector inconsistent: ClusterConfigState lists no tasks. Connect's /tasks alone
    # answers as many entries as the record claims, each with the configuration last committed for that task, or
    # null; the sidecar answers [] (docs/compatibility.md's row on /tasks of such a connector). Nothing else differs.
    records.config(target_state("rec-gap", "STOPPED"), connector_config("rec-gap", held("rec-gap", 3)),
                   commit("rec-gap", 3),
                   target_state("rec-stale", "STOPPED"), connector_config("rec-stale", held("rec-stale", 3)),
                   task_config("rec-stale", 0, {"t": "0"}), task_config("rec-stale", 1, {"t": "1"}),
                   commit("rec-stale", 2),
                   # Pending configurations are dropped at every commit: task 1's is not there for this one.
                   task_config("rec-stale", 0, {"t": "new 0"}),
                   ("task-rec-stale-\U0001d7cf", b'{"properties":{"t":"not task 1"}}'),
                   ("commit-rec-stale", BOM + b'{"tasks":003}'))
    connect, sidecar = records.connect, records.sidecar
    expected: dict[str, list[Any]] = {"rec-gap": [None, None, None], "rec-stale": [{"t": "0"}, {"t": "1"}, None]}
    for name, configs in expected.items():
        task_configs_shown(connect, name, configs)
        connect.wait_for_status(name, lambda status: status["connector"]["state"] == "STOPPED", "stopped", WAIT)
        same_answers(connect.request, sidecar.request, [route for route in routes(name) if not route.endswith("tasks")])
        assert sidecar.call("GET", f"/connectors/{name}")["tasks"] == []  # Connect's too
        assert sidecar.request("GET", f"/connectors/{name}/tasks").body == b"[]"
    assert {"rec-gap", "rec-stale"} <= set(records.listed())
