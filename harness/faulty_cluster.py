"""Fault injection on the embedded broker, for tests and benchmarks: broker down and up, latency, leader
moves, injected request errors, request tracking (``rdkafka_mock.h``'s control API). The service itself
never uses it."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from status_store.embedded.mock_cluster import MockCluster, Signatures, bind

_P = ctypes.c_void_p
_SIGNATURES: Signatures = {
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


@dataclass(frozen=True, slots=True)
class TrackedRequest:
    """A request a mock broker received."""

    broker_id: int
    api_key: int
    timestamp_us: int


class FaultyCluster(MockCluster):
    """A mock cluster with its control API: faults to inject and requests to count."""

    PRODUCE = 0
    FETCH = 1
    METADATA = 3

    def __init__(self, brokers: int = 1) -> None:
        super().__init__(brokers)
        bind(self._lib, _SIGNATURES)

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
