"""Prometheus exposition of the store's metrics (``GET /metrics``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ..routing import ConnectRoute

router = APIRouter(tags=["operations"], route_class=ConnectRoute)


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(request: Request) -> Response:
    """The Prometheus text exposition: the KIP-1278 counters, retry queue gauges and latencies."""
    registry: CollectorRegistry = request.app.state.registry
    # Collected on the event loop, where the store's state changes, so every figure is read whole; the text
    # is written in a thread: with a large fleet's series it takes most of the time, and the loop goes on.
    collected = Collected(list(registry.collect()))
    return Response(await asyncio.to_thread(generate_latest, collected), media_type=CONTENT_TYPE_LATEST)


class Collected(Collector):
    """Metric families already collected, for the exposition to write."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)
