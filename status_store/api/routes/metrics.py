"""Prometheus exposition of the store's metrics (``GET /metrics``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ..routing import ConnectRoute

router = APIRouter(tags=["operations"], route_class=ConnectRoute)


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(request: Request) -> Response:
    """The Prometheus text exposition: the KIP-1278 counters, retry queue gauges and latencies."""
    registry: CollectorRegistry = request.app.state.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
