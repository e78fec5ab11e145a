"""Benchmarks of status-store, each against a baseline measured in the same run (docs/BENCHMARKS.md).

Run a benchmark from the repository's root as a module, ``.venv/bin/python -m bench.<name> [--quick]``:

- ``core``: the store's read and write paths against raw confluent-kafka clients.
- ``retry``: the retry engine against Kafka Connect's own status writes (``writers``) under broker faults
  (``mock_faults``).
- ``connect_outage``: a status-topic outage on Apache Kafka's brokers seen by a real Connect worker's status
  store, by status-store and by ``writers``' re-implementation of Connect's resend, side by side.
- ``read_back``: the sidecar's own write until durable and read back (``PUT ?wait=true``) against a plain producer
  and consumer, on Apache Kafka's broker.
- ``connect_store``: the write path, the cold start and a large fleet's memory against Connect's own
  ``KafkaStatusBackingStore`` (a Java harness, bench/jvm) on Apache Kafka's broker.
- ``fleet_scale``: a fleet of 100,000 connectors x 10 tasks read back by one sidecar: ``/fleet`` and
  ``?expand=status`` for one client and 20 at once, ``/health`` meanwhile, memory and cold start.
- ``fleet``: a fleet of sidecars against a recovering broker, in virtual time.
- ``autorestart``: auto-restart against an operator's 1-minute poll, a storm of failures, a killed worker flagged
  against Connect's REST API, on two real Connect workers.
- ``soak``: minutes of status traffic through random faults.
- ``rest_api``: the HTTP API against a bare FastAPI app (``bare_app``).
- ``spark_history``: the Spark analytics against pandas (``pandas_history``) on generated history
  (``history_gen``).
- ``spark_cluster_history``: the analytics job on a Spark standalone cluster (``spark_cluster``) against
  ``local[2]``.
- ``spark_kafka``: ``status-store analyze`` from Kafka at 1M and 10M events, ``local[*]`` and a standalone cluster,
  against a consumer + DuckDB (``duckdb_history``), and the incremental ``--since`` run.
- ``spark_class_data``: a local Spark start and a small run with the class-data-sharing archive and without.

Every benchmark's ``--quick`` runs the same code on small sizes, in seconds, and writes nothing under docs/:
a check that it all still runs (the test suite runs each one), not a measurement to quote. ``--json FILE`` (where a
benchmark prints tables: ``soak``, ``events_storm``, ``fleet_scale``, ``retry``, ``fleet``, ``connect_outage``,
``autorestart``) also writes what the run found to FILE, each table's rows as objects keyed by the table's column
names, so a reader (tests/test_bench.py) reads figures by name.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import FAST_JVM


class BenchParser(argparse.ArgumentParser):
    """A benchmark's command line, with ``--quick``: each size option has a full-run default and a quick one,
    and ``parse`` gives every size left unset the one that applies."""

    def __init__(self, doc: str | None) -> None:
        super().__init__(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
        self.add_argument("--quick", action="store_true",
                          help="small sizes, in seconds: a check that it all runs, not a measurement")
        self.add_argument("--json", type=Path, metavar="FILE",
                          help="also write what the run found to FILE as JSON (each table's rows by column name)")
        self._sizes: dict[str, tuple[Any, Any]] = {}

    def add_size(self, *flags: str, full: Any, quick: Any, help: str, **kwargs: Any) -> None:
        """An option whose default is ``full``, or ``quick`` under ``--quick``."""
        action = self.add_argument(*flags, default=None, help=f"{help} (default {full}; quick {quick})", **kwargs)
        self._sizes[action.dest] = (full, quick)

    def add_key_values(self, *flags: str, help: str) -> None:
        """An option given as ``KEY=VALUE``, again for more: a dict (empty when not given); a value may hold ``=``,
        an argument without one is refused with argparse's error."""
        self.add_argument(*flags, action=_KeyValues, default={}, metavar="KEY=VALUE", help=help)

    def parse(self, argv: Sequence[str] | None = None) -> argparse.Namespace:
        """The parsed command line, every size filled in."""
        args = self.parse_args(argv)
        for name, (full, quick) in self._sizes.items():
            if getattr(args, name) is None:
                setattr(args, name, quick if args.quick else full)
        return args


class _KeyValues(argparse.Action):
    """Each ``KEY=VALUE`` given into one dict (a key given again keeps its last value)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        key, equals, value = str(values).partition("=")
        if not key or not equals:
            parser.error(f"{option_string} takes KEY=VALUE, not {values!r}")
        setattr(namespace, self.dest, {**getattr(namespace, self.dest), key: value})


def write_json(path: Path | None, found: Mapping[str, Any]) -> None:
    """What a run found, to ``path`` as JSON (``--json``; nothing when None): each table a list of rows, each row an
    object keyed by the table's column names, its figures as numbers."""
    if path is not None:
        path.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")


def quick_spark_settings(java_options: str = "") -> dict[str, str]:
    """Spark settings for quick runs: short-lived JVMs (``java_options``, then ``FAST_JVM``) on inputs of a few
    thousand rows (a few shuffle partitions)."""
    java = f"{java_options} {FAST_JVM}".strip()
    return {"spark.sql.shuffle.partitions": "4", "spark.driver.extraJavaOptions": java,
            "spark.executor.extraJavaOptions": java}


def load_average() -> str:
    """The machine's load averages over 1, 5 and 15 minutes, for a benchmark's report (other engineers share the
    cores)."""
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


@contextmanager
def quick_scratch(quick: bool) -> Iterator[Path | None]:
    """Under ``--quick``, a temporary directory for every file the run writes, removed at the end (a quick
    run keeps nothing and touches nothing under docs/); None for a full run, which writes where it says."""
    if not quick:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="bench-quick-") as scratch:
        yield Path(scratch)
