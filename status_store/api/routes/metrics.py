"""Prometheus exposition of the store's metrics (``GET /metrics``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ...fleet.series import DeferredFamilies, deferred_fleet
from ..routing import ConnectRoute

router = APIRouter(tags=["operations"], route_class=ConnectRoute)


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(request: Request) -> Response:
    """The Prometheus text exposition: the KIP-1278 counters, retry queue gauges and latencies."""
    registry: CollectorRegistry = request.app.state.registry
    # Collected on the event loop, where the store's state changes, so every figure is read whole; the fleet's
    # series from a view of the cache, made on a thread with the text: with a large fleet they take most of the time,
    # and the loop goes on.
    token = deferred_fleet.set(True)
    try:
        collected = Collected(list(registry.collect()))
    finally:
        deferred_fleet.reset(token)
    return Response(await asyncio.to_thread(generate_latest, collected), media_type=CONTENT_TYPE_LATEST)


class Collected(Collector):
    """Metric families already collected, for the exposition to write (deferred ones made as they come)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            if isinstance(family, DeferredFamilies):
                yield from family.make()
            else:
                yield family
