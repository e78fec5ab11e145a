"""The ports the harness hands its servers (brokers, Connect workers, sidecars, proxies): none from the kernel's
ephemeral range, whose ports any outgoing connection may take as its own between the pick and the server's bind (a
whole-suite run lost a Connect worker so: "Failed to bind to /127.0.0.1:47411 ... Address already in use"), and none
that another pytest-xdist worker may hand out too."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness import free_port, free_ports, port_slice


def ephemeral_range() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def test_ports_handed_out_are_below_the_ephemeral_range_distinct_and_free() -> None:
    low, _ = ephemeral_range()
    ports = free_ports(50) + [free_port() for _ in range(50)]
    assert all(port < low for port in ports), sorted(port for port in ports if port >= low)
    assert len(set(ports)) == len(ports)
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_some_server_listens_on_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # A slice of 11 ports (this process as one of 2,000 workers), walked round three times.
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2000")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    assert len(port_slice()) == (ephemeral_range()[0] - 10000) // 2000
    taken = []
    try:
        for port in free_ports(5):
            server = socket.socket()
            server.bind(("127.0.0.1", port))
            server.listen()
            taken.append(server)
        listening = {s.getsockname()[1] for s in taken}
        handed = {free_port() for _ in range(3 * len(port_slice()))}
        assert handed <= set(port_slice())
        assert not handed & listening
    finally:
        for server in taken:
            server.close()


def test_each_xdist_worker_hands_out_ports_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    handed: dict[str, set[int]] = {}
    for worker in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        handed[worker] = set(free_ports(20))
    assert not handed["gw0"] & handed["gw1"]
    assert not handed["gw1"] & handed["gw2"]
    assert not handed["gw0"] & handed["gw2"]
    slices = []
    for worker in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(port_slice())
    assert slices[0].stop <= slices[1].start
    assert slices[1].stop <= slices[2].start
    assert slices[2].stop <= ephemeral_range()[0]
