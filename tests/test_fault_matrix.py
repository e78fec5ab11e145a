"""The fault matrix's HTTP faults (harness/http_proxy.py) are the real ones on the wire: a sidecar's answers to an
agent's writes that lie, nest deeply, reset or trickle, in front of a real sidecar.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from harness.http_proxy import DEEP_JSON_LEVELS, AnswerFault, HttpFaultProxy
from harness.service import Service

# ----------------------------------------------------------------------------- the proxy's answer faults

AGENT_REQUEST = {"agent": "a-test", "worker_id": "127.0.0.1:8083", "ack": 0, "lease_ms": 10_000,
                 "updates": [{"seq": 1, "kind": "connector", "connector": "c", "state": "RUNNING", "trace": None,
                              "worker_id": "127.0.0.1:8083", "generation": 1, "safe": False}]}


@pytest.fixture
def proxy(service: Service) -> Iterator[HttpFaultProxy]:
    """The proxy in front of a real sidecar (``status-store serve`` on the embedded broker)."""
    serving = service.wait_for("Uvicorn running on")
    port = int(re.search(r"127\.0\.0\.1:(\d+)", serving).group(1))  # type: ignore[union-attr]
    with HttpFaultProxy(port) as running:
        yield running


def post(port: int, body: object, read: int = 1 << 20, timeout: float = 30.0) -> bytes:
    """``POST /agent/statuses`` on a socket of its own; what arrives (up to ``read`` bytes, or until closed)."""
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"POST /agent/statuses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        answer = b""
        while len(answer) < read and (chunk := s.recv(read - len(answer))):
            answer += chunk
        return answer


def body(answer: bytes) -> Any:
    head, _, text = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return json.loads(text)


def get(port: int, path: str) -> tuple[int, bytes]:
    """``GET path`` straight from the sidecar: its status code and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, text = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), text


def test_an_answer_written_untruly_says_written_for_what_the_sidecar_never_got(proxy: HttpFaultProxy) -> None:
    proxy.answer_fault = AnswerFault.WRITTEN_UNTRULY
    answer = body(post(proxy.port, AGENT_REQUEST))
    assert answer["accepted"] == [{"seq": 1, "result": "pending"}]
    assert answer["outcomes"] == [{"seq": 1, "key": "status-connector-c", "result": "written", "attempts": 1}]
    # The sidecar's real instance, so the agent takes the answer for the sidecar's; and nothing reached it.
    assert answer["instance"] == json.loads(get(proxy.upstream_port, "/")[1])["instance"]
    assert get(proxy.upstream_port, "/connectors/c/status")[0] == 404


def test_pending_forever_and_the_wrong_shape_are_answered_without_forwarding(proxy: HttpFaultProxy) -> None:
    proxy.answer_fault = AnswerFault.PENDING_FOREVER
    assert body(post(proxy.port, AGENT_REQUEST))["outcomes"] == []
    proxy.answer_fault = AnswerFault.WRONG_SHAPE
    assert not isinstance(body(post(proxy.port, AGENT_REQUEST))["accepted"], list)
    proxy.answer_fault = AnswerFault.DEEP_JSON
    deep = post(proxy.port, AGENT_REQUEST).partition(b"\r\n\r\n")[2]
    assert deep == b"[" * DEEP_JSON_LEVELS + b"]" * DEEP_JSON_LEVELS
    assert get(proxy.upstream_port, "/connectors/c/status")[0] == 404


def test_a_reset_answer_is_a_tcp_rst_after_the_sidecar_took_the_write(proxy: HttpFaultProxy) -> None:
    proxy.answer_fault = AnswerFault.RESET
    with pytest.raises(ConnectionResetError):
        post(proxy.port, AGENT_REQUEST)
    proxy.answer_fault = AnswerFault.NONE
    # The sidecar took it: the session says so when asked again (an update sent again is taken once).
    again = body(post(proxy.port, {**AGENT_REQUEST, "wait_ms": 1000}))
    assert again["accepted"][0]["result"] in ("pending", "written")
    assert [outcome["result"] for outcome in again["outcomes"]] in ([], ["written"])


def test_a_trickling_answer_comes_a_byte_at_a_time(proxy: HttpFaultProxy) -> None:
    proxy.answer_fault = AnswerFault.TRICKLE
    data = json.dumps(AGENT_REQUEST).encode()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
        s.sendall(b"POST /agent/statuses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: "
                  + str(len(data)).encode() + b"\r\n\r\n" + data)
        assert s.recv(100) == b"H"
        # The next byte comes TRICKLE_S (3 s) later, never sooner: within 1 s, nothing.
        s.settimeout(1.0)
        with pytest.raises(TimeoutError):
            s.recv(100)
