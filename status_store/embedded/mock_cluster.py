"""librdkafka's in-process mock cluster (``rdkafka_mock.h``) through ctypes: the embedded broker.

The library is loaded by path after importing confluent_kafka, so it is the very instance the Python
client uses. Only the embedded broker (and the tests, through ``harness.faulty_cluster``) load it.
``rdkafka_mock.h`` says its API is "NOT covered by API/ABI stability": the signatures below were written
for librdkafka 2.16, so any other version is refused with a clear error rather than risk a crash.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading
from typing import Any

import confluent_kafka

from ..kafka.client_log import SYSLOG_LEVELS, ClientLog, mark_embedded

# The librdkafka series these signatures were written for (and pyproject.toml's confluent-kafka pin).
SUPPORTED_SERIES = "2.16."
RD_KAFKA_PRODUCER = 0

_P = ctypes.c_void_p
# void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
_LOG_CALLBACK = ctypes.CFUNCTYPE(None, _P, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
Signatures = dict[str, tuple[Any, list[Any]]]
_SIGNATURES: Signatures = {
    "rd_kafka_conf_new": (_P, []),
    "rd_kafka_conf_set_log_cb": (None, [_P, _LOG_CALLBACK]),
    "rd_kafka_new": (_P, [ctypes.c_int, _P, ctypes.c_char_p, ctypes.c_size_t]),
    "rd_kafka_name": (ctypes.c_char_p, [_P]),
    "rd_kafka_destroy": (None, [_P]),
    "rd_kafka_mock_cluster_new": (_P, [_P, ctypes.c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [_P]),
    "rd_kafka_mock_cluster_bootstraps": (ctypes.c_char_p, [_P]),
    "rd_kafka_mock_set_controller_id": (ctypes.c_int, [_P, ctypes.c_int32]),
    "rd_kafka_mock_topic_create": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]),
}


class UnsupportedLibrdkafka(RuntimeError):
    """The installed librdkafka is not the series the mock-cluster signatures were written for."""


@functools.cache
def library() -> ctypes.CDLL:
    """The loaded librdkafka with the mock cluster's signatures, after checking its version."""
    check_version(confluent_kafka.libversion()[0])
    package_dir = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    candidates = sorted(glob.glob(os.path.join(package_dir, os.pardir, "confluent_kafka.libs", "librdkafka*.so*")))
    if not candidates:
        raise OSError(f"librdkafka not found beside {package_dir}; is confluent-kafka installed from a wheel?")
    lib = ctypes.CDLL(candidates[0])
    bind(lib, _SIGNATURES)
    return lib


def check_version(version: str) -> None:
    """Refuse a librdkafka of another series than the signatures were written for."""
    if not version.startswith(SUPPORTED_SERIES):
        raise UnsupportedLibrdkafka(
            f"the embedded broker uses librdkafka's mock cluster, whose C API is not stable across versions; it "
            f"was written for librdkafka {SUPPORTED_SERIES}x and this confluent-kafka has {version}. Install "
            f"confluent-kafka {SUPPORTED_SERIES}x, or set bootstrap.servers to use a real cluster")


def bind(lib: ctypes.CDLL, signatures: Signatures) -> None:
    """Declare the return and argument types of these functions (ctypes needs them for pointers)."""
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


def error_name(code: int) -> str:
    """librdkafka's name for an error code, e.g. ``NOT_LEADER_FOR_PARTITION``."""
    return confluent_kafka.KafkaError(code).name()


# The mock clusters' own handles serve embedded brokers only.
_OWNER_LOG = ClientLog(embedded=True)


def _log_owner_line(handle: int | None, level: int, facility: bytes | None, text: bytes | None) -> None:
    """Log callback of the mock clusters' handles; librdkafka calls it from its own threads."""
    name = library().rd_kafka_name(handle) if handle else None
    _OWNER_LOG.line(SYSLOG_LEVELS[max(0, min(level, 7))], (facility or b"").decode(errors="replace"),
                    (name or b"rdkafka").decode(errors="replace"), (text or b"").decode(errors="replace"))


# Kept for the life of the process: librdkafka may call it until the last handle is destroyed.
_OWNER_LOG_CALLBACK = _LOG_CALLBACK(_log_owner_line)


class MockCluster:
    """librdkafka's in-process mock Kafka cluster on 127.0.0.1.

    Any process can connect to ``bootstrap_servers`` while this object lives. No CreateTopics,
    no DescribeConfigs, no compaction, about 5 MiB kept per partition, nothing persisted.
    """

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
        mark_embedded(self.bootstrap_servers)

    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1) -> None:
        """Create a topic (the mock broker has no CreateTopics API)."""
        self._check(self._lib.rd_kafka_mock_topic_create(self._handle(), topic.encode(), partitions,
                                                         replication_factor), "topic_create")

    def close(self) -> None:
        """Destroy the cluster, then its handle (the other order aborts)."""
        with self._lock:
            if self._cluster is None:
                return
            mark_embedded(self.bootstrap_servers, False)
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
