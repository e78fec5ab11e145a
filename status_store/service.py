"""Runs the service: (embedded broker,) store and HTTP API under uvicorn, with a bounded shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Iterator

import uvicorn
from prometheus_client import CollectorRegistry

from .api import create_app
from .api.http_server import client_log_limits, http_config
from .config import StoreConfig
from .embedded import start_embedded_broker
from .librdkafka import MockCluster
from .metrics import StoreMetrics
from .store import StatusStore

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn, except that a SIGINT/SIGTERM is not re-raised after the HTTP server stops.

    uvicorn re-raises the signal once it has shut down, which would kill the process before the
    store's bounded flush runs; here the caller finishes its shutdown and exits on its own.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


async def serve(config: StoreConfig) -> None:
    """Start everything, serve until SIGINT/SIGTERM, then stop within the configured bounds."""
    cluster: MockCluster | None = None
    if config.bootstrap_servers is None:
        cluster = start_embedded_broker(config)
        bootstrap = cluster.bootstrap_servers
        print(f"Embedded Kafka broker (in-memory, not durable): bootstrap.servers={bootstrap}", flush=True)
    else:
        bootstrap = config.bootstrap_servers
    registry = CollectorRegistry()
    metrics = StoreMetrics(registry)
    store = StatusStore(config, bootstrap, listeners=[metrics])
    metrics.watch_store(store)
    try:
        await store.start()
        app = create_app(store, registry, config.rest_token, config.rest_max_body_bytes)
        with client_log_limits(asyncio.get_running_loop()):
            await _Server(http_config(app, config.rest_host, config.rest_port)).serve()
    finally:
        lost = await store.stop()
        if cluster is not None:
            cluster.close()
    if lost:
        sys.exit(1)
