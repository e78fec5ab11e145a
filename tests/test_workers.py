"""The Connect group's members as the sidecar reads them (``act/workers.py``): Connect's member metadata, worker ids,
and which workers are gone since when, on a clock of the test's own (pure). Against a real Connect cluster:
tests/test_autorestart_live.py."""

from __future__ import annotations

import struct

import pytest

from status_store.act.workers import Liveness, Member, worker_id, worker_url


def metadata(url: str, version: int = 2) -> bytes:
    """A Connect member's metadata (WorkerState) as Connect 4.4.0 writes it: version, URL, config offset, and from
    version 1 the previous assignment (null here)."""
    encoded = url.encode()
    rest = struct.pack(">q", 6) + (struct.pack(">i", -1) if version >= 1 else b"")
    return struct.pack(">hh", version, len(encoded)) + encoded + rest


# Taken from a live Connect 4.4.0 worker's JoinGroup metadata (sessioned protocol).
LIVE = b"\x00\x02\x00\x17http://127.0.0.1:41893/\x00\x00\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff"


@pytest.mark.parametrize(("raw", "url"), [
    (LIVE, "http://127.0.0.1:41893/"),
    (metadata("http://h:8083/", 0), "http://h:8083/"),
    (metadata("https://[::1]:8443/", 1), "https://[::1]:8443/"),
    (b"", None),
    (b"\x00\x02\x00\x30http://cut", None),
    (b"\xff\xff\x00\x01x", None),
    (b"\x00\x00\x00\x02\xff\xfe", None),
])
def test_worker_url_from_member_metadata(raw: bytes, url: str | None) -> None:
    assert worker_url(raw) == url


@pytest.mark.parametrize(("url", "worker"), [
    ("http://127.0.0.1:41893/", "127.0.0.1:41893"),
    ("https://[::1]:8443/", "[::1]:8443"),
    ("http://connect-0.connect.svc:8083", "connect-0.connect.svc:8083"),
    ("http://no-port/", None),
    ("http://h:notaport/", None),
])
def test_worker_id_is_the_urls_host_and_port(url: str, worker: str | None) -> None:
    assert worker_id(url) == worker


A, B = "http://a:8083/", "http://b:8083/"


def test_a_worker_that_leaves_is_gone_since_the_first_read_without_it() -> None:
    live = Liveness()
    assert live.gone("a:8083") is False
    assert live.up("a:8083") is None
    assert live.read([Member("m-a", metadata(A)), Member("m-b", metadata(B))], 100.0) == ([], [])
    assert live.up("a:8083") is True
    assert live.gone_since("b:8083") is None
    # A rebalance: metadata is empty while the group is not Stable; the members are known by their member ids.
    assert live.read([Member("m-a", b""), Member("m-b", b"")], 105.0) == ([], [])
    assert live.read([Member("m-a", b"")], 110.0) == (["b:8083"], [])
    assert live.gone_since("b:8083") == 110.0
    assert live.up("b:8083") is False
    live.failed(115.0)  # a failed read changes nothing
    assert live.gone_since("b:8083") == 110.0
    # Back (a new member id, as a restarted worker has).
    assert live.read([Member("m-a", b""), Member("m-b2", metadata(B))], 120.0) == ([], ["b:8083"])
    assert live.gone("b:8083") is False


def test_a_worker_named_but_never_seen_is_gone_since_the_first_read() -> None:
    live = Liveness()
    live.read([Member("m-a", metadata(A))], 50.0)
    assert live.gone_since("old:8083") == 50.0
    assert live.gone_since(None) is None
    views = {v.worker_id: v for v in live.workers(["old:8083", "a:8083"])}
    assert views["a:8083"].up
    assert views["a:8083"].url == A
    assert not views["old:8083"].up
    assert views["old:8083"].gone_since == 50.0


def test_a_member_whose_url_no_read_gave_is_counted_not_guessed() -> None:
    live = Liveness()
    live.read([Member("m-x", b"")], 1.0)
    assert live.unknown_members == 1
    assert dict(live.present) == {}


def test_workers_that_left_are_forgotten_once_no_status_names_them() -> None:
    live = Liveness()
    live.read([Member("m-a", metadata(A)), Member("m-b", metadata(B))], 1.0)
    live.read([Member("m-a", metadata(A))], 2.0)
    live.forget(["a:8083"])
    assert [v.worker_id for v in live.workers([])] == ["a:8083"]


def test_a_group_never_seen_with_members_marks_no_worker_gone() -> None:
    """A group.id naming no group (a typo) reads as a group without members: nothing is gone until one is listed."""
    live = Liveness()
    live.read([], 10.0)
    live.read([], 15.0)
    assert live.first_read == 10.0
    assert live.seen_since is None
    assert live.gone("a:8083") is False
    assert live.gone_since("a:8083") is None
    assert [(v.worker_id, v.up, v.gone_since) for v in live.workers(["a:8083"])] == [("a:8083", False, None)]
    # Once the group is seen with members, what statuses name and it does not list is gone since then.
    live.read([Member("m-b", metadata(B))], 20.0)
    assert live.seen_since == 20.0
    assert live.gone_since("a:8083") == 20.0
    # A group that loses every member later (the whole cluster down) marks them all gone, as it should.
    assert live.read([], 30.0) == (["b:8083"], [])
    assert live.gone_since("b:8083") == 30.0


def test_the_workers_of_the_group_are_bounded_by_the_group_not_by_the_ids_statuses_name() -> None:
    live = Liveness()
    live.read([Member("m-a", metadata(A)), Member("m-b", metadata(B))], 1.0)
    live.read([Member("m-a", metadata(A))], 2.0)
    forged = [f"forged-{n}:8083" for n in range(5000)]
    assert [v.worker_id for v in live.workers()] == ["a:8083", "b:8083"]
    assert live.never_members([*forged, "a:8083", "b:8083"]) == 5000
    assert live.gone_since("forged-7:8083") == 1.0  # their statuses still count as on gone workers
