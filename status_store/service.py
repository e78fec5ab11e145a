"""Runs the service: (embedded broker,) store and HTTP API under uvicorn, with a bounded shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import ipaddress
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn
from prometheus_client import CollectorRegistry

from .act.actions import Actions
from .api import create_app
from .api.app import store_events
from .api.credentials import ServerTls, WriteTokens
from .api.http_logs import client_log_limits
from .api.http_server import BoundedServer, http_config
from .api.starting import StartGate
from .config import StoreConfig
from .embedded.broker import start_embedded_broker
from .embedded.mock_cluster import MockCluster
from .errors import KafkaUnavailableError, TopicSetupError
from .fleet.config_topic import ConfigTopic
from .fleet.events import StatusEvents
from .kafka.security_failures import security_failures
from .kafka.topics import topic_exists, wait_for_topic
from .metrics import StoreMetrics
from .store import StatusStore

log = logging.getLogger(__name__)

# A full garbage collection after this many collections of the middle generation (CPython's default: 10).
FULL_COLLECTION_EVERY = 100
# Of the stop's bound, what is kept for the process's end after the store's stop (at most a quarter of the bound).
EXIT_RESERVE_S = 0.5


class _Server(BoundedServer):
    """uvicorn, except that a SIGINT/SIGTERM is not re-raised after the HTTP server stops, and the whole stop keeps
    to one bound.

    uvicorn re-raises the signal once it has shut down, which would kill the process before the
    store's bounded flush runs; here the caller finishes its shutdown and exits on its own. The first signal sets
    when the whole stop must end (``stop_by``, ``time.monotonic()``: ``shutdown_s`` after it) and tells the store
    (``stopping``); the requests in progress get half the time left at most.
    """

    def __init__(self, config: uvicorn.Config, status_events: StatusEvents, shutdown_s: float,
                 stopping: Callable[[], None]) -> None:
        super().__init__(config)
        self._status_events = status_events
        self._shutdown_s = shutdown_s
        self._stopping = stopping
        self.stop_by: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.stop_by is None:
            self.stop_by = time.monotonic() + self._shutdown_s
            self._stopping()
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        addresses = dict.fromkeys(bound.getsockname()[:2] for server in self.servers for bound in server.sockets)
        scheme = "https" if self.config.ssl is not None else "http"
        for host, port in addresses:
            shown = f"[{host}]" if ":" in host else host
            log.info("Status page: %s://%s:%d/ui (every connector and task, live)", scheme, shown, port)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn waits for open connections to finish: end the event streams, which would not on their own.
        self._status_events.close()
        if self.stop_by is not None:
            self.config.timeout_graceful_shutdown = max(0, int((self.stop_by - time.monotonic()) / 2))
        await super().shutdown(sockets)

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
    _warn_about_open_writes(config)
    security_failures.watch(config.client_configs)
    # The REST API's files are read before Kafka is asked anything: one that cannot be used stops the start at once.
    tls = ServerTls(config.rest_tls) if config.rest_tls.enabled else None
    tokens = WriteTokens(config.rest_token, config.rest_token_file)
    cluster, bootstrap = await _brokers(config)
    registry = CollectorRegistry()
    try:
        store = StatusStore(config, bootstrap)
    except BaseException:  # a spool that cannot be used: the embedded broker goes too
        if cluster is not None:
            cluster.close()
        raise
    StoreMetrics.watching(store, registry)
    # Before the store reads: the events kept start with the topic, so a client resumes across a restart.
    status_events = store_events(store, from_start=True)
    # Before the store reads too: a restart is planned as a FAILED status is read, those read at the start included.
    actions = Actions(config, store, status_events)
    registry.register(actions.collector())
    configs = (ConfigTopic(config.config_topic, bootstrap, config.config_topic_client_configs)
               if config.config_topic is not None else None)
    app = create_app(store, registry, tokens, config.rest_max_body_bytes, configs, status_events,
                     actions=actions, docs=config.rest_docs)
    gate = StartGate(app)
    loop = asyncio.get_running_loop()

    def stopping() -> None:  # from the signal handler: on the loop, soon
        loop.call_soon_threadsafe(store.stopping)

    server = _Server(http_config(gate, config.rest_host, config.rest_port,
                                 tls=tls.context if tls is not None else None), status_events,
                     config.shutdown_timeout_s, stopping)
    serving: asyncio.Future[None] | None = None
    try:
        with client_log_limits(loop):
            starting = asyncio.ensure_future(_start(store, configs, bootstrap, gate))
            waited = asyncio.ensure_future(gate.waited.wait())
            await asyncio.wait((starting, waited), return_when=asyncio.FIRST_COMPLETED)
            waited.cancel()
            if not starting.done():
                # A topic is not there yet (the worker creates it): /health and /ready, which says what is waited
                # for, are served meanwhile.
                serving = asyncio.ensure_future(server.serve())
                await asyncio.wait((starting, serving), return_when=asyncio.FIRST_COMPLETED)
                if not starting.done():  # a signal stopped the server first
                    starting.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await starting
                    return
            try:
                starting.result()
            except BaseException:
                if serving is not None:
                    server.should_exit = True
                    await serving
                raise
            await actions.start()
            tune_collector()
            gate.open()
            await (serving if serving is not None else server.serve())
    finally:
        await actions.stop()
        if configs is not None:
            await configs.stop()
        # The whole stop within sidecar.shutdown.timeout.ms of the signal (or of now, when it did not come from one),
        # the process's end included (exit_reserve_s).
        stop_by = server.stop_by
        cut_short = await store.stop(None if stop_by is None else
                                     stop_by - time.monotonic() - exit_reserve_s(config.shutdown_timeout_s))
        if cluster is not None:
            cluster.close()
    if cut_short and not store.kept_at_stop:
        sys.exit(1)


def exit_reserve_s(bound_s: float) -> float:
    """What of the stop's bound is kept for the process's end once the store has stopped: the event loop's close and
    the logs' flush (the interpreter's own finalization is skipped, see ``cli``). On a starved CPU (a Kubernetes CPU
    limit of 100m) the store's close and the interpreter's end took 1.1 s past the store's wait, 0.6 s past the
    bound."""
    return min(EXIT_RESERVE_S, bound_s / 4)


def tune_collector() -> None:
    """Keep the garbage collector off the write path's back: what exists once the store has started (modules, the
    cache read from the topic) is moved out of its sight (``gc.freeze``), and full collections come ten times
    rarer. A burst of writes (a rebalance, a batch, a spool replay) holds a few objects per pending write; with
    CPython's defaults every full collection walks all of them and the cache, and a burst of 50,000 writes paid
    for over a dozen of them, more time than the writes themselves. Cycles are still collected; refcounting
    frees everything else at once as before."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


async def _brokers(config: StoreConfig) -> tuple[MockCluster | None, str]:
    """The embedded broker (started, its address printed) or the configured brokers (reached)."""
    if config.bootstrap_servers is None:
        cluster = start_embedded_broker(config)
        print(f"Embedded Kafka broker (in-memory, NOT durable: every status is lost when this process exits): "
              f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
        return cluster, cluster.bootstrap_servers
    # A first request bounded by its own timeout: when no broker answers, it says why.
    await topic_exists(config.bootstrap_servers, config.client_configs, config.topic, config.startup_timeout_s)
    return None, config.bootstrap_servers


async def _start(store: StatusStore, configs: ConfigTopic | None, bootstrap: str, gate: StartGate) -> None:
    """``store.start()``, then the config topic read to its end (when configured), each bounded by
    ``sidecar.startup.timeout.ms``; running out of it is an error that says so. A topic that is not there is waited
    for, without a bound, and the gate says so: a sidecar started before its worker waits for the worker to create
    Connect's config topic, and its status topic when this client may not create it."""
    bound = store.config.startup_timeout_s
    topic = store.config.topic

    def missing(refused: str, why: str) -> None:
        gate.waiting(f"the status topic {topic!r} ({why}; this client could not create it: {refused}; a Connect "
                     "worker creates it when it first starts)")

    try:
        while True:
            try:
                await store.start()
                break
            except TopicSetupError as e:
                if await topic_exists(bootstrap, store.config.client_configs, topic, bound):
                    raise  # it is there and cannot be used (its cleanup policy): an operator must act
                refused = functools.partial(missing, str(e).rstrip("."))
                await wait_for_topic(bootstrap, store.config.client_configs, topic, refused)
                gate.done_waiting()
        if configs is not None:
            await configs.start(bound, gate.waiting)
            gate.done_waiting()
    except TimeoutError as e:
        raise KafkaUnavailableError(str(e) or f"cannot reach Kafka at {bootstrap} within {bound:g} s (the status topic "
                                              "was not set up and read in time)") from None


def _warn_about_open_writes(config: StoreConfig) -> None:
    """Without a token anyone who reaches the port can write statuses: fine on loopback only."""
    if config.rest_token is None and config.rest_token_file is None and not _is_loopback(config.rest_host):
        log.warning("The HTTP API binds %s, not a loopback address, and sidecar.rest.token is not set: anyone who "
                    "reaches this port can write statuses%s. Set sidecar.rest.token.", config.rest_host,
                    " and read connector configurations (which may hold credentials)"
                    if config.config_topic is not None else "")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any address
