"""The options of ``status-store analyze`` (argparse only: the CLI shows them without importing pyspark)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

DEFAULT_STATUS_TOPIC = "connect-status"
FLAP_TRANSITIONS = 5
FLAP_WINDOW_MS = 10 * 60 * 1000
MAX_RECORDS_PER_RANGE = 500_000
RANGE_TIMEOUT_S = 120.0
# How many days before the as-of day a --since run keeps of the records it has read (see docs/analytics.md).
RETENTION_DAYS = 7
# Reading a topic's metadata and its partitions' bounds: brokers that do not answer by then fail the run.
METADATA_TIMEOUT_S = 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the analyze options to a parser."""
    source = parser.add_argument_group("input: Kafka topics, or exported files")
    source.add_argument("--bootstrap-servers", help="Kafka brokers to read the topics from")
    source.add_argument("--status-topic", default=DEFAULT_STATUS_TOPIC,
                        help="the status topic (default: %(default)s); with --files, the topic column's value")
    source.add_argument("--history-topic", help="the history topic (status.storage.history.topic); "
                        "without it only the latest statuses are computed")
    source.add_argument("--files", nargs="+", metavar="PATH",
                        help="JSON Lines (.jsonl/.json/.ndjson) or Parquet files or directories of exported records")
    source.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE",
                        help="a consumer setting for the readers (security settings, ...); repeatable")
    source.add_argument("--max-records-per-range", type=_positive_int, default=MAX_RECORDS_PER_RANGE,
                        help="offsets per Spark task reading Kafka (default: %(default)s)")
    source.add_argument("--range-timeout", type=float, default=RANGE_TIMEOUT_S, metavar="SECONDS",
                        help="deadline of one range read; a range cut short is reported (default: %(default)s)")
    source.add_argument("--timeout", type=_positive_float, default=METADATA_TIMEOUT_S, metavar="SECONDS",
                        help="bound on reading each topic's metadata and partition bounds; brokers that do not "
                             "answer within it fail the run (default: %(default)s)")
    source.add_argument("--since", metavar="DIR",
                        help="incremental run: the --out of an earlier run made with --since; read only the records "
                             "after its checkpoint and analyse them with the records it kept (a first run: everything)")
    source.add_argument("--retention-days", type=_positive_int, default=RETENTION_DAYS, metavar="DAYS",
                        help="with --since: keep for later runs the history of the last DAYS days before the as-of "
                             "day (and what it needs from before), and the status records of those days (older "
                             "ones compacted to the last per key); the dated outputs of older days stay as earlier "
                             "runs wrote them (default: %(default)s)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="output directory (a local path or any URL Spark writes to)")
    parser.add_argument("--log-file", metavar="PATH",
                        help="where Spark's log and progress bars go (default: <out>/_logs/analyze-<time>.log for a "
                             "local --out, else ./status-store-analyze-<time>.log)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting (spark.master, spark.driver.memory, spark.sql.shuffle.partitions, ...); "
                             "repeatable. Without spark.master: local[*], or spark-submit's master")
    parser.add_argument("--as-of", type=parse_time, metavar="TIME",
                        help="time of the analysis: epoch milliseconds or ISO-8601 (UTC unless it has an offset); "
                             "default: the newest history event")
    parser.add_argument("--flap-transitions", type=_non_negative_int, default=FLAP_TRANSITIONS,
                        help="flapping: more than this many state transitions... (default: %(default)s)")
    parser.add_argument("--flap-window-ms", type=_positive_int, default=FLAP_WINDOW_MS,
                        help="...inside a window of this many milliseconds (default: %(default)s)")
    parser.add_argument("--no-report", action="store_true", help="write the Parquet outputs only")


def parse_settings(pairs: list[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` strings as a dict; a clear error naming the option otherwise."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"{option} expects KEY=VALUE, got {pair!r}")
        settings[key.strip()] = value
    return settings


def parse_time(text: str) -> int:
    """Epoch milliseconds from an integer or an ISO-8601 time (UTC when it has no offset)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not epoch milliseconds nor an ISO-8601 time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value
