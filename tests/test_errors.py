"""The retry decision's table of Kafka errors names errors the client really reports."""

from __future__ import annotations

from confluent_kafka import KafkaError

from status_store.errors import ERROR_KINDS, FATE_UNKNOWN, ErrorKind, WriteFailedError, classify


def test_every_classified_error_is_a_name_the_client_reports() -> None:
    for name in ERROR_KINDS:
        assert KafkaError(getattr(KafkaError, name)).name() == name


def test_a_write_whose_fate_is_unknown_is_retried() -> None:
    # A value that may still land goes again (tests/test_partition_gate.py): so these are retriable, not fatal.
    assert FATE_UNKNOWN.issubset(name for name, kind in ERROR_KINDS.items() if kind is ErrorKind.RETRIABLE)


def test_errors_are_classified_by_name_and_unknown_ones_are_retried() -> None:
    def failed(name: str) -> WriteFailedError:
        return WriteFailedError("k", getattr(KafkaError, name, -999), name, "test")

    assert classify(failed("NOT_ENOUGH_REPLICAS")) is ErrorKind.RETRIABLE
    assert classify(failed("FENCED_LEADER_EPOCH")) is ErrorKind.LEADER_CHANGE
    assert classify(failed("MSG_SIZE_TOO_LARGE")) is ErrorKind.FATAL
    assert classify(failed("SOME_FUTURE_ERROR")) is ErrorKind.RETRIABLE
