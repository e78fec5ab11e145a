"""A store's stop ends its partition watch, whenever it comes. On Python 3.11, ``asyncio.wait_for`` returns the
inner result when its task is cancelled in the turn the inner future completes: the cancellation is lost. The watch
awaited its read of the topic's configuration that way, in a loop, so a stop that came in that turn waited for the
watch for good (a whole-suite run: a teardown past pytest-timeout, the event loop in the watch's 0.2 s sleep). The
package no longer uses ``wait_for`` (a ruff rule bans it); this test stops the watch in exactly that turn."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest

from harness.faulty_cluster import FaultyCluster
from status_store.kafka import partition_watch
from status_store.kafka.partition_watch import PartitionWatch

from .conftest import Broker
from .helpers import eventually

WAIT = 15.0


async def test_a_stop_in_the_turn_a_read_completes_ends_the_watch(
        mock_cluster: FaultyCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic(1)
    watch = PartitionWatch(topic, mock_cluster.bootstrap_servers, {}, lambda: [0], lambda partition: True)
    stops: list[asyncio.Task[None]] = []
    wrap_future = asyncio.wrap_future

    def stop_when_done(future: concurrent.futures.Future[Any]) -> asyncio.Future[Any]:
        # The configuration's answer and the stop in one turn: the stop's callback is the future's first.
        wrapped = wrap_future(future)
        if not stops:
            wrapped.add_done_callback(lambda _: stops.append(asyncio.ensure_future(watch.stop())))
        return wrapped

    monkeypatch.setattr(partition_watch.asyncio, "wrap_future", stop_when_done)
    watch.start()
    try:
        await eventually(lambda: bool(stops), WAIT)  # the watch read the topic's configuration
        async with asyncio.timeout(WAIT):
            await stops[0]
    finally:
        monkeypatch.undo()
        await asyncio.wait_for(watch.stop(), WAIT)
