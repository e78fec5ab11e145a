"""ctypes access to the librdkafka that ships inside the confluent-kafka wheel.

Used for what the Python client does not expose: checking client properties by name, and
librdkafka's mock cluster (``rdkafka_mock.h``) for the embedded broker and fault injection.
The library is loaded by path after importing confluent_kafka, so it is the very instance the
Python client uses.

Also where librdkafka's own log lines go: every client (the Python clients through their ``logger``
setting, the mock cluster's handle through its log callback) logs through ``ClientLog`` into the
``status_store.librdkafka`` logger, never raw to stderr.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import confluent_kafka

RD_KAFKA_PRODUCER = 0
_CONF_UNKNOWN = -2
_CONF_INVALID = -1

_P = ctypes.c_void_p
# void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
_LOG_CALLBACK = ctypes.CFUNCTYPE(None, _P, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_conf_new": (_P, []),
    "rd_kafka_conf_destroy": (None, [_P]),
    "rd_kafka_conf_set": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
    "rd_kafka_conf_set_log_cb": (None, [_P, _LOG_CALLBACK]),
    "rd_kafka_new": (_P, [ctypes.c_int, _P, ctypes.c_char_p, ctypes.c_size_t]),
    "rd_kafka_name": (ctypes.c_char_p, [_P]),
    "rd_kafka_destroy": (None, [_P]),
    "rd_kafka_err2name": (ctypes.c_char_p, [ctypes.c_int]),
    "rd_kafka_mock_cluster_new": (_P, [_P, ctypes.c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [_P]),
    "rd_kafka_mock_cluster_bootstraps": (ctypes.c_char_p, [_P]),
    "rd_kafka_mock_set_controller_id": (ctypes.c_int, [_P, ctypes.c_int32]),
    "rd_kafka_mock_topic_create": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]),
    "rd_kafka_mock_broker_set_down": (ctypes.c_int, [_P, ctypes.c_int32]),
    "rd_kafka_mock_broker_set_up": (ctypes.c_int, [_P, ctypes.c_int32]),
    "rd_kafka_mock_broker_set_rtt": (ctypes.c_int, [_P, ctypes.c_int32, ctypes.c_int]),
    "rd_kafka_mock_partition_set_leader": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32]),
    "rd_kafka_mock_push_request_errors_array": (
        None,
        [_P, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)],
    ),
    "rd_kafka_mock_clear_request_errors": (None, [_P, ctypes.c_int16]),
    "rd_kafka_mock_start_request_tracking": (None, [_P]),
    "rd_kafka_mock_stop_request_tracking": (None, [_P]),
    "rd_kafka_mock_clear_requests": (None, [_P]),
    "rd_kafka_mock_get_requests": (ctypes.POINTER(_P), [_P, ctypes.POINTER(ctypes.c_size_t)]),
    "rd_kafka_mock_request_id": (ctypes.c_int32, [_P]),
    "rd_kafka_mock_request_api_key": (ctypes.c_int16, [_P]),
    "rd_kafka_mock_request_timestamp": (ctypes.c_int64, [_P]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_P), ctypes.c_size_t]),
}


@functools.cache
def library() -> ctypes.CDLL:
    """The loaded librdkafka with the signatures this project uses."""
    package_dir = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    candidates = sorted(glob.glob(os.path.join(package_dir, os.pardir, "confluent_kafka.libs", "librdkafka*.so*")))
    if not candidates:
        raise OSError(f"librdkafka not found beside {package_dir}; is confluent-kafka installed from a wheel?")
    lib = ctypes.CDLL(candidates[0])
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


def check_property(name: str, value: str) -> str | None:
    """Ask librdkafka whether it knows ``name`` and accepts ``value``.

    Returns None when it does, "unknown" when librdkafka has no such property, or librdkafka's
    own message for an invalid value.
    """
    lib = library()
    conf = lib.rd_kafka_conf_new()
    errstr = ctypes.create_string_buffer(512)
    try:
        result = lib.rd_kafka_conf_set(conf, name.encode(), value.encode(), errstr, len(errstr))
    finally:
        lib.rd_kafka_conf_destroy(conf)
    if result == _CONF_UNKNOWN:
        return "unknown"
    if result == _CONF_INVALID:
        return errstr.value.decode(errors="replace")
    return None


def error_name(code: int) -> str:
    """librdkafka's name for an error code, e.g. ``NOT_LEADER_FOR_PARTITION``."""
    raw = library().rd_kafka_err2name(code)
    return raw.decode() if raw else str(code)


client_log = logging.getLogger("status_store.librdkafka")
# syslog(3) severities, as librdkafka logs them, as Python levels.
_SYSLOG_LEVELS = (logging.CRITICAL, logging.CRITICAL, logging.CRITICAL, logging.ERROR, logging.WARNING,
                  logging.INFO, logging.INFO, logging.DEBUG)
# Lines expected on an embedded broker: it has no admin APIs, clients may connect before its listener
# is ready, and it closes idle connections. There they are DEBUG; from a real cluster, WARNING.
_EXPECTED_ON_EMBEDDED = re.compile(r"Connection refused|Disconnected|not supported by broker|"
                                   r"No `bootstrap\.servers` configured")
_THREAD_PREFIX = re.compile(r"^\[thrd:[^\]]*\]: ")
# The same line of the same client again within this many seconds is DEBUG (an unreachable broker
# makes every reconnection attempt log one).
REPEAT_INTERVAL_S = 30.0
# bootstrap.servers of the mock clusters of this process (embedded brokers).
_embedded: set[str] = set()


def is_embedded(bootstrap_servers: str | None) -> bool:
    """Whether ``bootstrap_servers`` is a mock cluster running in this process (an embedded broker)."""
    return bootstrap_servers in _embedded


class ClientLog:
    """Where one librdkafka client's log lines go: the ``status_store.librdkafka`` logger, with the client's
    name, at the level of their syslog severity; lines expected on an embedded broker are DEBUG there and
    WARNING elsewhere, and repeats within ``REPEAT_INTERVAL_S`` are DEBUG.

    The confluent-kafka clients call ``log`` (their ``logger`` setting) from the thread that polls them.
    """

    def __init__(self, embedded: bool) -> None:
        """``embedded``: the client talks to an embedded broker (see ``is_embedded``)."""
        self.embedded = embedded
        # The last line at WARNING or above, to explain a failure such as an unreachable cluster.
        self.last_problem: str | None = None
        self._lock = threading.Lock()
        self._last_logged: dict[tuple[str, str, str], float] = {}

    def log(self, level: int, fmt: str, facility: str, client: str, text: str) -> None:
        """confluent-kafka's call: ``level`` is already a Python level; the line is ``facility``,
        ``client`` (the handle's name) and ``text``."""
        self.line(level, facility, client, text)

    def line(self, level: int, facility: str, client: str, text: str) -> None:
        """Log one librdkafka line at (about) ``level``."""
        text = _THREAD_PREFIX.sub("", text)
        if _EXPECTED_ON_EMBEDDED.search(text):
            level = logging.DEBUG if self.embedded else logging.WARNING
        if level >= logging.WARNING:
            self.last_problem = text
            if self._repeated(facility, client, text):
                level = logging.DEBUG
        client_log.log(level, "%s %s: %s", client, facility, text)

    def _repeated(self, facility: str, client: str, text: str) -> bool:
        # Digits vary between repeats of one line ("after 12ms in state CONNECT").
        key = (client, facility, re.sub(r"\d+", "N", text))
        now = time.monotonic()
        with self._lock:
            last = self._last_logged.get(key)
            if last is not None and now - last < REPEAT_INTERVAL_S:
                return True
            self._last_logged[key] = now
            return False


def client_logging(bootstrap_servers: str | None) -> dict[str, Any]:
    """Client settings sending a Python client's log lines to a new ``ClientLog`` (``logger``)."""
    return {"logger": ClientLog(is_embedded(bootstrap_servers)), "log.thread.name": False}


# The mock clusters' own handles serve embedded brokers only.
_OWNER_LOG = ClientLog(embedded=True)


def _log_owner_line(handle: int | None, level: int, facility: bytes | None, text: bytes | None) -> None:
    """Log callback of the mock clusters' handles; librdkafka calls it from its own threads."""
    name = library().rd_kafka_name(handle) if handle else None
    _OWNER_LOG.line(_SYSLOG_LEVELS[max(0, min(level, 7))], (facility or b"").decode(errors="replace"),
                    (name or b"rdkafka").decode(errors="replace"), (text or b"").decode(errors="replace"))


# Kept for the life of the process: librdkafka may call it until the last handle is destroyed.
_OWNER_LOG_CALLBACK = _LOG_CALLBACK(_log_owner_line)


@dataclass(frozen=True, slots=True)
class TrackedRequest:
    """A request a mock broker received."""

    broker_id: int
    api_key: int
    timestamp_us: int


class MockCluster:
    """librdkafka's in-process mock Kafka cluster on 127.0.0.1, with its control API.

    Any process can connect to ``bootstrap_servers`` while this object lives. No CreateTopics,
    no DescribeConfigs, no compaction, about 5 MiB kept per partition, nothing persisted.
    """

    PRODUCE = 0
    FETCH = 1
    METADATA = 3

    def __init__(self, brokers: int = 1) -> None:
        if brokers < 1:
            raise ValueError("a mock cluster needs at least one broker")
        self._lib = library()
        self._lock = threading.Lock()
        conf = self._lib.rd_kafka_conf_new()
        self._lib.rd_kafka_conf_set_log_cb(conf, _OWNER_LOG_CALLBACK)
        errstr = ctypes.create_string_buffer(512)
        # The handle that owns the cluster: a producer that never produces.
        self._rk = self._lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        if not self._rk:
            raise OSError(f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}")
        self._cluster = self._lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not self._cluster:
            self._lib.rd_kafka_destroy(self._rk)
            raise OSError("rd_kafka_mock_cluster_new failed")
        # Without a controller, admin requests wait for one until they time out.
        self._lib.rd_kafka_mock_set_controller_id(self._cluster, 1)
        self.broker_ids = tuple(range(1, brokers + 1))
        self.bootstrap_servers: str = self._lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()
        _embedded.add(self.bootstrap_servers)

    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1) -> None:
        """Create a topic (the mock broker has no CreateTopics API)."""
        self._check(self._lib.rd_kafka_mock_topic_create(self._handle(), topic.encode(), partitions,
                                                         replication_factor), "topic_create")

    def broker_down(self, broker_id: int = -1) -> None:
        """Disconnect a broker (-1: all) and refuse new connections; leaders do not move."""
        self._check(self._lib.rd_kafka_mock_broker_set_down(self._handle(), broker_id), "broker_set_down")

    def broker_up(self, broker_id: int = -1) -> None:
        """Accept connections on a broker (-1: all) again."""
        self._check(self._lib.rd_kafka_mock_broker_set_up(self._handle(), broker_id), "broker_set_up")

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay a broker's (-1: all) responses by ``rtt_ms``."""
        self._check(self._lib.rd_kafka_mock_broker_set_rtt(self._handle(), broker_id, rtt_ms), "broker_set_rtt")

    def set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move a partition's leadership (-1: leaderless)."""
        self._check(self._lib.rd_kafka_mock_partition_set_leader(self._handle(), topic.encode(), partition,
                                                                 broker_id), "partition_set_leader")

    def push_request_errors(self, api_key: int, *error_codes: int) -> None:
        """Fail the next requests of ``api_key`` with these Kafka error codes, in order."""
        codes = (ctypes.c_int * len(error_codes))(*error_codes)
        self._lib.rd_kafka_mock_push_request_errors_array(self._handle(), api_key, len(error_codes), codes)

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the errors still pushed for ``api_key``."""
        self._lib.rd_kafka_mock_clear_request_errors(self._handle(), api_key)

    def start_tracking(self) -> None:
        """Record every request the brokers receive from now on."""
        self._lib.rd_kafka_mock_start_request_tracking(self._handle())

    def stop_tracking(self) -> None:
        """Stop recording requests (those recorded are kept)."""
        self._lib.rd_kafka_mock_stop_request_tracking(self._handle())

    def requests(self, api_key: int | None = None, clear: bool = False) -> list[TrackedRequest]:
        """The recorded requests, oldest first, optionally of one API only."""
        count = ctypes.c_size_t(0)
        array = self._lib.rd_kafka_mock_get_requests(self._handle(), ctypes.byref(count))
        found: list[TrackedRequest] = []
        if array:
            try:
                for i in range(count.value):
                    request = array[i]
                    key = self._lib.rd_kafka_mock_request_api_key(request)
                    if api_key is None or key == api_key:
                        found.append(TrackedRequest(self._lib.rd_kafka_mock_request_id(request), key,
                                                    self._lib.rd_kafka_mock_request_timestamp(request)))
            finally:
                self._lib.rd_kafka_mock_request_destroy_array(array, count.value)
        if clear:
            self._lib.rd_kafka_mock_clear_requests(self._handle())
        return found

    def close(self) -> None:
        """Destroy the cluster, then its handle (the other order aborts)."""
        with self._lock:
            if self._cluster is None:
                return
            _embedded.discard(self.bootstrap_servers)
            self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
            self._lib.rd_kafka_destroy(self._rk)
            self._cluster = None

    def _handle(self) -> int:
        if self._cluster is None:
            raise RuntimeError("the mock cluster is closed")
        return int(self._cluster)

    def _check(self, code: int, what: str) -> None:
        if code:
            raise RuntimeError(f"rd_kafka_mock_{what} failed: {error_name(code)}")
