"""The mock cluster for the retry benchmarks: retriable Produce errors that last, and Produce request counts.

librdkafka's mock cluster keeps injected request errors in an array and pops the first one for each
request by moving the rest of the array down (a ``memmove`` of the whole stack). Pushing two million
errors up front, to cover a long fault, makes every Produce request cost the mock broker a 32 MB copy,
a few milliseconds each, which caps any client at roughly 200 Produce requests per second. Here a
thread keeps the stack between ``_STACK_LOW`` and ``_STACK_HIGH`` errors instead, topping it up as
requests use them, so a fault lasts as long as wanted and a request costs what it costs without one.

To know how many errors were used, the thread drains the cluster's request tracking every few
milliseconds (read, then clear). The two calls run while holding the GIL (``ctypes.PyDLL``), so no
Python thread runs between them; a request that the mock broker tracks in the microsecond between the
read and the clear is cleared uncounted. At the request rates seen here that is a handful in tens of
thousands, and it errs toward more errors left on the stack, never fewer.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

from harness.faulty_cluster import FaultyCluster
from status_store.embedded.mock_cluster import bind, library

# Errors kept on the stack while a fault lasts: enough for a few tens of thousands of requests per
# second between two top-ups, small enough that popping one costs microseconds.
_STACK_LOW = 1000
_STACK_HIGH = 2000
_TICK_S = 0.005

_P = ctypes.c_void_p
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_mock_get_requests": (ctypes.POINTER(_P), [_P, ctypes.POINTER(ctypes.c_size_t)]),
    "rd_kafka_mock_clear_requests": (None, [_P]),
    "rd_kafka_mock_request_api_key": (ctypes.c_int16, [_P]),
    "rd_kafka_mock_request_id": (ctypes.c_int32, [_P]),
    "rd_kafka_mock_request_timestamp": (ctypes.c_int64, [_P]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_P), ctypes.c_size_t]),
}


def _holding_gil() -> ctypes.PyDLL:
    """The same librdkafka, called without releasing the GIL."""
    lib = ctypes.PyDLL(library()._name)
    bind(lib, _SIGNATURES)
    return lib


class BenchCluster(FaultyCluster):
    """A mock cluster that counts Produce requests (with their times) and can fail all of them for as long
    as wanted. Times are ``time.monotonic()`` seconds: librdkafka's clock is the same CLOCK_MONOTONIC."""

    def __init__(self, brokers: int = 1) -> None:
        super().__init__(brokers)
        self._gil_lib = _holding_gil()
        self._ledger_lock = threading.Lock()
        # (time, broker id) of every Produce request received since the cluster started.
        self._produce: list[tuple[float, int]] = []
        self._failing_with: int | None = None
        self._errors_left = 0
        self._closing = threading.Event()
        self.start_tracking()
        self._thread = threading.Thread(target=self._run, name="bench-mock-faults", daemon=True)
        self._thread.start()

    def fail_produce(self, error_code: int) -> float:
        """From now on, every Produce request fails with ``error_code``; returns the time it began."""
        with self._ledger_lock:
            self._failing_with = error_code
            self._errors_left = 0
            self._top_up()
        return time.monotonic()

    def heal_produce(self) -> float:
        """Produce requests succeed again from now on; returns the time the fault ended."""
        with self._ledger_lock:
            self._failing_with = None
            self.clear_request_errors(FaultyCluster.PRODUCE)
        return time.monotonic()

    def produce_requests(self, start: float = 0.0, end: float = float("inf"), broker_id: int | None = None) -> int:
        """Produce requests received in ``[start, end)``, by one broker or all."""
        with self._ledger_lock:
            self._drain()
            return sum(1 for at, broker in self._produce
                       if start <= at < end and (broker_id is None or broker == broker_id))

    def close(self) -> None:
        """Stop the fault thread, then destroy the cluster."""
        self._closing.set()
        self._thread.join()
        super().close()

    def _run(self) -> None:
        while not self._closing.wait(_TICK_S):
            with self._ledger_lock:
                self._drain()
                if self._failing_with is not None and self._errors_left < _STACK_LOW:
                    self._top_up()

    def _top_up(self) -> None:
        assert self._failing_with is not None
        count = _STACK_HIGH - self._errors_left
        self.push_request_errors(FaultyCluster.PRODUCE, *[self._failing_with] * count)
        self._errors_left += count

    def _drain(self) -> None:
        """Move the tracked requests into the ledger (caller holds the ledger lock)."""
        lib, handle = self._gil_lib, self._handle()
        count = ctypes.c_size_t(0)
        array = lib.rd_kafka_mock_get_requests(handle, ctypes.byref(count))
        lib.rd_kafka_mock_clear_requests(handle)
        if not array:
            return
        try:
            for i in range(count.value):
                request = array[i]
                if lib.rd_kafka_mock_request_api_key(request) == FaultyCluster.PRODUCE:
                    self._produce.append((lib.rd_kafka_mock_request_timestamp(request) / 1e6,
                                          lib.rd_kafka_mock_request_id(request)))
                    if self._failing_with is not None:
                        self._errors_left -= 1
        finally:
            lib.rd_kafka_mock_request_destroy_array(array, count.value)
