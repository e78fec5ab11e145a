"""status-store and real Connect workers on the same topics, both directions: the records Connect 4.x and 3.x
write are the bytes status-store writes for the same statuses; statuses the sidecar writes are what Connect's
REST API then shows; a safe write is refused over a live worker's newer generation; Connect's worker settings
(topic tracking, exactly-once source support) are honoured as Connect honours them."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.real_kafka import (
    SCRIPTED_VERSION,
    SOURCE_CONNECTOR,
    Answer,
    ConnectCluster,
    KafkaCluster,
    all_in,
    kafka_line,
    states,
    wait_until,
)
from harness.sidecar import LiveSidecar
from status_store.connect.codec import decode_status, decode_topic_status, encode_status, encode_topic_status
from status_store.connect.model import ConnectorKey, TaskKey, TopicKey, parse_key

pytestmark = pytest.mark.timeout(600)
WAIT = 60.0
MESSAGE = "boom \U0001f600 \u00e9 \u2028"


def source(**settings: str) -> dict[str, str]:
    return {"connector.class": SOURCE_CONNECTOR, "tasks.max": "2", **settings}


def reencoded(key: bytes, value: bytes) -> bytes:
    """A record's value as status-store writes what it reads from it."""
    parsed = parse_key(key.decode())
    if isinstance(parsed, TopicKey):
        return encode_topic_status(decode_topic_status(value))
    assert isinstance(parsed, ConnectorKey | TaskKey), key
    status = decode_status(value)
    encoded = encode_status(status.state, status.worker_id, status.generation, status.trace, status.version)
    assert encoded is not None
    return encoded


def create_and_fail(connect: ConnectCluster, prefix: str) -> None:
    """A running source (writing to a topic, so that its topic status is written too), one with a failing task and one
    whose connector fails on start; until Connect shows them."""
    connect.call("PUT", f"/connectors/{prefix}-ok/config", source(**{"scripted.topic": f"{prefix}-out"}))
    connect.call("PUT", f"/connectors/{prefix}-bad/config", source(**{"scripted.task.1": "fail",
                                                                      "scripted.task.1.message": MESSAGE}))
    connect.call("PUT", f"/connectors/{prefix}-dead/config", source(**{"scripted.connector": "fail-on-start"}))
    connect.wait_for_status(f"{prefix}-ok", all_in("RUNNING", 2), "running", WAIT)
    connect.wait_for_status(f"{prefix}-bad", lambda st: states(st) == ("RUNNING", ["RUNNING", "FAILED"]), "failed",
                            WAIT)
    connect.wait_for_status(f"{prefix}-dead", lambda st: st["connector"]["state"] == "FAILED", "failed", WAIT)
    wait_until(lambda: connect.call("GET", f"/connectors/{prefix}-ok/topics")[f"{prefix}-ok"]["topics"] != [], WAIT,
               f"{prefix}-ok's topic tracked")


def test_every_record_connect_4_and_3_write_is_what_status_store_writes_for_it(
        connect_cluster: ConnectCluster, connect3_worker: ConnectCluster) -> None:
    for connect, prefix in ((connect_cluster, "bytes4"), (connect3_worker, "bytes3")):
        create_and_fail(connect, prefix)
        connect.call("PUT", f"/connectors/{prefix}-ok/pause")
        connect.wait_for_status(f"{prefix}-ok", all_in("PAUSED", 2), "paused", WAIT)
    # Every record but those tests wrote in a foreign writer's place (tests/test_connect_records_live.py).
    written = {name: [(key, value) for key, value in connect.kafka.records(connect.status_topic, foreign=False)
                      if value is not None]
               for name, connect in (("4.x", connect_cluster), ("3.x", connect3_worker))}
    for name, found in written.items():
        assert len(found) >= 10, name
        for key, value in found:
            assert reencoded(key, value) == value, f"Connect {name} wrote {key!r} = {value!r}"
    # 4.x writes KIP-891's version (null where the worker knows none), 3.x never does.
    assert all(b',"version":' in value for key, value in written["4.x"] if not key.startswith(b"status-topic-"))
    assert any(f',"version":"{SCRIPTED_VERSION}"}}'.encode() in value for _, value in written["4.x"])
    assert not any(b'"version"' in value for _, value in written["3.x"])
    assert all(any(key.startswith(b"status-topic-") for key, _ in found) for found in written.values())


def test_statuses_the_sidecar_writes_are_what_connect_shows(connect_cluster: ConnectCluster,
                                                           connect_sidecar: LiveSidecar) -> None:
    worker = connect_cluster.worker
    sidecar = connect_sidecar
    status = {"state": "RUNNING", "worker_id": "sidecar-host:8083", "generation": 7, "version": "2.1.0"}
    sidecar.call("PUT", "/connectors/side/status?wait=true", status)
    sidecar.call("POST", "/statuses?wait=true", {"updates": [
        {"kind": "task", "connector": "side", "task": 0, "state": "FAILED", "worker_id": "sidecar-host:8083",
         "generation": 7, "trace": f"java.lang.RuntimeException: {MESSAGE}\n\tat X.y(X.java:1)\n", "version": None},
        {"kind": "task", "connector": "side", "task": 1, "state": "UNASSIGNED", "worker_id": "sidecar-host:8083",
         "generation": 7},
        {"kind": "topic", "connector": "side", "topic": "side-out", "task": 0, "discoverTimestamp": 1700000000000},
    ]})
    same_answers(worker.request, sidecar.request, ["/connectors/side/status", "/connectors/side/tasks/0/status",
                                                   "/connectors/side/tasks/1/status", "/connectors/side/topics"])
    shown = worker.call("GET", "/connectors/side/status")
    assert shown["connector"] == {"state": "RUNNING", "worker_id": "sidecar-host:8083", "version": "2.1.0"}
    assert [task.get("version", "left out") for task in shown["tasks"]] == [None, None]
    sidecar.call("PUT", "/connectors/side/topics/reset?wait=true", expect=(200,))
    same_answers(worker.request, sidecar.request, ["/connectors/side/topics"])
    assert worker.call("GET", "/connectors/side/topics") == {"side": {"topics": []}}
    sidecar.call("DELETE", "/connectors/side/status?wait=true")
    same_answers(worker.request, sidecar.request, ["/connectors/side/status", "/connectors/side/tasks/0/status"])
    assert worker.request("GET", "/connectors/side/status").status == 404


# Connect's HTTP details (Jetty 12 and Jersey 3.1 in 4.4.0), asked of both: (method, path, Accept, what is compared).
# "all": the status, the body, the media type and Allow. Where docs/compatibility.md names a difference, less: Jersey's
# 404 and 405 carry no Content-Type and its 405 no Allow (status-store sends both); Jetty refuses an encoded slash,
# an empty or dot segment, a backslash and a NUL with its own body (status-store with Connect's error body).
HTTP_DETAILS = [
    ("HEAD", "/connectors/http-c/status", "application/json", "all"),
    ("HEAD", "/connectors/http-c/tasks/1/status", "application/json", "all"),
    ("HEAD", "/connectors/http-none/status", "application/json", "all"),
    ("GET", "/connectors/http-c/status/", "application/json", "all"),
    ("GET", "/connectors/http-c/tasks/0/status/", "application/json", "all"),
    ("GET", "/connectors/http-c/topics/", "application/json", "all"),
    ("GET", "/connectors/http-c/tasks/../status", "application/json", "all"),
    ("GET", "/connectors/http-c/./tasks/0/status", "application/json", "status and body"),
    ("GET", "/connectors/./status", "application/json", "all"),
    *(("OPTIONS", path, accept, "all") for path in ("/", "/health") for accept in (
        "*/*", "text/plain", "text/*", "application/json", "text/html", "application/*", "image/png",
        "application/json, text/plain", "text/plain;q=0.5, application/json", "*/*, application/json",
        "text/*, application/json;q=0.9")),
    ("GET", "/connectors/http-c/tasks/-1/status", "application/json", "all"),
    ("GET", "/connectors/http-c/tasks/2147483648/status", "application/json", "all"),
    ("OPTIONS", "/nope", "application/json", "status and body"),
    ("GET", "/nope", "application/json", "status and body"),
    ("GET", "/connectors/http-c/nope", "application/json", "status and body"),
    ("DELETE", "/connectors", "application/json", "status and body"),
    ("GET", "/connectors/a%2Fb/status", "application/json", "status"),
    *(("GET", path, "application/json", "status") for path in (
        "/connectors//status", "/connectors/http-c/%2e/status", "/connectors/%2e%2e/status",
        "/connectors/../..", "/connectors/x/../../../status",
        "/connectors/a%5Cb/status", "/connectors/a\\b/status", "/connectors/a%00b/status")),
]


def test_http_details_are_answered_as_connect_answers_them(connect_cluster: ConnectCluster,
                                                           connect_sidecar: LiveSidecar) -> None:
    connect_cluster.call("PUT", "/connectors/http-c/config", source())
    connect_cluster.wait_for_status("http-c", all_in("RUNNING", 2), "running", WAIT)
    same_answers(connect_cluster.request, connect_sidecar.request,
                 ["/connectors/http-c/status", "/connectors/http-c/tasks/1/status"])
    try:
        differences = [f"{method} {path} (Accept: {accept})\n  Connect:      {theirs}\n  status-store: {ours}"
                       for method, path, accept, what in HTTP_DETAILS
                       for theirs, ours in [(answered(connect_cluster.request(method, path, accept=accept), what),
                                             answered(connect_sidecar.request(method, path, accept=accept), what))]
                       if theirs != ours]
        assert not differences, "\n".join(differences)
        # The one difference (docs/compatibility.md): Java's Integer.valueOf takes "+1" and "01" as task 1; here
        # one task has one path.
        for number in ("+1", "01"):
            path = f"/connectors/http-c/tasks/{number}/status"
            assert (connect_cluster.request("GET", path).status, connect_sidecar.request("GET", path).status) == (
                200, 404)
    finally:
        connect_cluster.call("DELETE", "/connectors/http-c")


def absolute_form(base_url: str, method: str, target: str, host: str | None = None) -> tuple[int, bytes]:
    """A request whose target is in absolute form (``GET http://host:port/path HTTP/1.1``, as a client talking to a
    proxy sends it), with ``host`` as its Host header (default: the target's authority): the status and body."""
    port = int(base_url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        connection.putrequest(method, target, skip_host=host is not None, skip_accept_encoding=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.putheader("Accept", "application/json")
        connection.putheader("Connection", "close")
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def seen(status: int, body: bytes) -> tuple[int, object]:
    """An answer as a client sees it: a success's body whole, an error's message (Jetty answers some refusals with
    a page of its own, ``<title>Error 400 Authority!=Host</title>``, others with Connect's handler's JSON, whose
    fields differ from the error body status-store answers every error with)."""
    if status < 400:
        return status, body
    page = re.search(rb"<title>Error \d+ (.*?)</title>", body)
    return status, page.group(1).decode() if page is not None else json.loads(body)["message"]


def test_a_request_target_in_absolute_form_is_answered_as_connect_answers_it(
        connect_cluster: ConnectCluster, connect_sidecar: LiveSidecar) -> None:
    """status-store answered such a target 400 "Ambiguous URI empty segment" (it read "http://..." as the path)."""
    connect_cluster.call("PUT", "/connectors/absolute-c/config", source())
    connect_cluster.wait_for_status("absolute-c", all_in("RUNNING", 2), "running", WAIT)
    same_answers(connect_cluster.request, connect_sidecar.request, ["/connectors/absolute-c/status"])
    try:
        differences = []
        for path in ("/connectors/absolute-c/status", "/connectors/absolute-c/tasks/0/status", "/nope",
                     "/connectors//status"):
            for authority, host in (("{own}", None), ("{own}", "localhost:1"), ("example.com:8083", None),
                                    ("example.com", "{own}")):
                answers = []
                for server in (connect_cluster.worker.url, connect_sidecar.url):
                    own = server.removeprefix("http://")
                    answers.append(seen(*absolute_form(server, "GET", f"http://{authority.format(own=own)}{path}",
                                                       host.format(own=own) if host is not None else None)))
                if answers[0] != answers[1]:
                    differences.append(f"GET http://{authority}{path} (Host: {host or authority})\n"
                                       f"  Connect:      {answers[0]}\n  status-store: {answers[1]}")
        assert not differences, "\n".join(differences)
    finally:
        connect_cluster.call("DELETE", "/connectors/absolute-c")


def answered(answer: Answer, what: str) -> tuple[object, ...]:
    """What a client sees of an answer: its status, body, and the headers that say what the body is, or ``what``
    of them."""
    headers = {name.lower(): value for name, value in answer.headers.items()}
    seen = (answer.status, answer.body, headers.get("content-type", "").split(";")[0], headers.get("allow"))
    return seen[:{"all": 4, "status and body": 2, "status": 1}[what]]


def test_a_safe_write_over_a_live_workers_newer_generation_is_refused(connect_cluster: ConnectCluster,
                                                                     connect_sidecar: LiveSidecar) -> None:
    connect_cluster.call("PUT", "/connectors/guarded/config", source(**{"tasks.max": "1"}))
    live = connect_cluster.wait_for_status("guarded", all_in("RUNNING", 1), "running", WAIT)
    generation = _generation(connect_cluster, "status-task-guarded-0")
    stale = {"state": "FAILED", "worker_id": "gone-host:8083", "generation": generation - 1, "trace": "stale"}
    refused = connect_sidecar.request("PUT", "/connectors/guarded/tasks/0/status?safe=true&wait=true", stale)
    assert refused.status == 409, refused.body
    assert connect_cluster.call("GET", "/connectors/guarded/status") == live
    same_answers(connect_cluster.request, connect_sidecar.request, ["/connectors/guarded/status"])
    connect_cluster.call("DELETE", "/connectors/guarded")


def _generation(connect: ConnectCluster, key: str) -> int:
    values = [value for k, value in connect.kafka.records(connect.status_topic) if k == key.encode() and value]
    generation: int = json.loads(values[-1])["generation"]
    return generation


def test_records_of_connect_3_are_served_as_connect_4_serves_them(connect3_worker: ConnectCluster,
                                                                 tmp_path: Path) -> None:
    create_and_fail(connect3_worker, "v3")
    with LiveSidecar(tmp_path, connect3_worker) as sidecar:
        routes = [f"/connectors/{name}{route}" for name in ("v3-ok", "v3-bad", "v3-dead")
                  for route in ("/status", "/tasks/0/status", "/tasks/1/status", "")]
        # Connect 3.x has no version field: status-store serves Connect 4.x's shape, null for a status without one.
        same_answers(connect3_worker.request, sidecar.request, [*routes, "/connectors?expand=status"],
                     shape=without_null_versions)
        served = sidecar.call("GET", "/connectors/v3-ok/status")
        assert served["connector"]["version"] is None


def without_null_versions(value: Any) -> Any:
    """An answer without ``"version": null`` fields (what Connect 3.x never serves)."""
    if isinstance(value, dict):
        return {k: without_null_versions(v) for k, v in value.items() if not (k == "version" and v is None)}
    if isinstance(value, list):
        return [without_null_versions(v) for v in value]
    return value


Ask = Callable[[str, str], Answer]


def same_answers(theirs: Ask, ours: Ask, routes: list[str], shape: Callable[[Any], Any] = lambda value: value
                 ) -> None:
    """Wait, bounded, until both sides answer each route with the same status and JSON (``shape`` applied to
    status-store's)."""
    last: dict[str, tuple[Any, Any]] = {}

    def agree() -> bool:
        last.clear()
        for route in routes:
            a, b = theirs("GET", route), ours("GET", route)
            mine = (b.status, shape(b.json()) if b.body else None)
            if (a.status, a.json() if a.body else None) != mine:
                last[route] = ((a.status, a.json() if a.body else None), mine)
        return not last

    try:
        wait_until(agree, 30, "Connect and status-store agree", interval=0.3)
    except TimeoutError:
        pytest.fail("\n".join(f"{route}\n  Connect:      {a}\n  status-store: {b}" for route, (a, b) in last.items()))


def one_worker(name: str, settings: dict[str, str], doc: str) -> Callable[..., Iterator[ConnectCluster]]:
    """A module's fixture: one Connect 4.x worker, with topics and a group of its own, with ``settings``."""
    def worker(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectCluster]:
        with ConnectCluster(kafka_line("kafka-4"), tmp_path_factory.mktemp(name), kafka, name, workers=1,
                            settings=settings) as cluster:
            yield cluster

    worker.__doc__ = doc
    return pytest.fixture(scope="module", name=name.replace("-", "_"))(worker)


untracked = one_worker("untracked", {"topic.tracking.enable": "false"}, "A worker with topic tracking off.")
no_resets = one_worker("no-resets", {"topic.tracking.allow.reset": "false"},
                       "A worker whose topic tracking cannot be reset.")
exactly_once = one_worker("exactly-once", {"exactly.once.source.support": "enabled"},
                          "A worker with exactly-once source support (KIP-618): its config topic is transactional.")


@pytest.mark.parametrize("cluster", ["untracked", "no_resets"])
def test_topic_tracking_settings_are_honoured_as_connect_honours_them(cluster: str, request: pytest.FixtureRequest,
                                                                     tmp_path: Path) -> None:
    connect: ConnectCluster = request.getfixturevalue(cluster)
    connect.call("PUT", "/connectors/tracked/config", source(**{"tasks.max": "1", "scripted.topic": f"{cluster}-out"}))
    connect.wait_for_status("tracked", all_in("RUNNING", 1), "running", WAIT)
    with LiveSidecar(tmp_path, connect) as sidecar:  # the worker's own file: its topic.tracking.* settings
        for method in ("GET", "PUT"):
            path = "/connectors/tracked/topics" + ("/reset" if method == "PUT" else "")
            theirs, ours = connect.request(method, path), sidecar.request(method, path)
            if method == "GET" and theirs.status == 200:
                continue  # the topics listed move as the task writes; compared in tests/test_connect_oracle.py
            assert (ours.status, ours.json()) == (theirs.status, theirs.json()), path
            assert theirs.status == 403


def test_the_config_topic_is_read_committed_under_exactly_once_source_support(exactly_once: ConnectCluster,
                                                                             tmp_path: Path) -> None:
    connect = exactly_once
    connect.call("PUT", "/connectors/committed/config", source(**{"tasks.max": "1"}))
    connect.wait_for_status("committed", all_in("RUNNING", 1), "running", WAIT)
    # A configuration in a transaction that aborts: Connect's workers never see it.
    producer = Producer({"bootstrap.servers": connect.kafka.bootstrap_servers, "transactional.id": "aborting-leader"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(connect.config_topic, json.dumps({"properties": {
        "connector.class": SOURCE_CONNECTOR, "name": "aborted", "tasks.max": "1"}}).encode(), b"connector-aborted")
    producer.produce(connect.config_topic, json.dumps({"state": "STARTED", "state.v2": "STARTED"}).encode(),
                     b"target-state-aborted")
    producer.flush(30)
    producer.abort_transaction(30)
    routes = ["/connectors", "/connectors/aborted", "/connectors/committed", "/connectors?expand=info"]
    # The worker's own file (exactly.once.source.support=enabled), and the same without it.
    with (LiveSidecar(tmp_path / "eos", connect) as sidecar,
          LiveSidecar(tmp_path / "uncommitted", connect, {"exactly.once.source.support": "disabled"}) as uncommitted):
        same_answers(connect.request, sidecar.request, routes)
        assert connect.call("GET", "/connectors") == ["committed"]
        # What the sidecar answered before it read the config topic read_committed (and what it must not):
        assert sorted(uncommitted.call("GET", "/connectors")) == ["aborted", "committed"]
        # The status topic is read as Connect reads it, its own isolation level (read_uncommitted).
        same_answers(connect.request, sidecar.request, ["/connectors/committed/status"])
