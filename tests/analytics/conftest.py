"""One local Spark for the whole session, tuned to start fast on a small machine, and the generated histories the
tests share."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from harness import history_gen
from status_store.analytics.analysis import Analysis, analyze
from status_store.analytics.options import FLAP_TRANSITIONS, FLAP_WINDOW_MS
from status_store.analytics.session import finish, get_session

FAST_START = {
    "spark.master": "local[2]",
    # One task per core in each stage (what ``status-store analyze`` itself picks for a small input on two cores),
    # still more than one partition: an empty analysis ran in 9.0 to 9.8 s with 2 against 10.4 to 25.1 s with 4,
    # alternated in one session on this 2-core machine at load 11.
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    # A short-lived test JVM: a small, quick collector and the fast compiler only (and the class-data archive of
    # local runs: get_session's class_data).
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.sql.adaptive.enabled": "false",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Spark tests share one session, and a timeout that fires inside a call to the JVM leaves the session's
    gateway half-read for every later test: give them a hang guard of minutes (a loaded two-core machine
    runs one job for over two), not the suite's default."""
    for item in items:
        if "tests/analytics/" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(600))


@pytest.fixture(scope="session")
def java() -> None:
    """Skips what needs Spark where it cannot run: without Java 17+ on PATH."""
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17+ (not found on PATH)")


@pytest.fixture(scope="session")
def spark(java: None) -> Iterator[SparkSession]:
    """A local[2] session with 2 shuffle partitions, no UI, bound to 127.0.0.1, its JVM started from the class-data
    archive of local runs (written at the end of the session when there is none yet)."""
    session = get_session(FAST_START, app_name="status-store-tests", class_data=True)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    finish()


class GeneratedHistories:
    """Histories of harness/history_gen.py, each generated once per session."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def data(self, events: int, seed: int) -> Path:
        """The directory of ``events`` generated events (``status`` and ``history``) from ``seed``."""
        data = self.root / f"{events}-{seed}"
        if not data.exists():
            history_gen.generate(data, events, seed=seed)
        return data


class GeneratedAnalyses:
    """Spark's analyses of generated histories, each made once per session: the tests that only read one share it
    (an analysis is many Spark jobs, most of a minute on a loaded machine)."""

    def __init__(self, spark: SparkSession, histories: GeneratedHistories) -> None:
        self.spark, self.histories = spark, histories
        self._made: dict[tuple[int, int, int, int], Analysis] = {}

    def analysis(self, events: int, seed: int, flap_transitions: int = FLAP_TRANSITIONS,
                 flap_window_ms: int = FLAP_WINDOW_MS) -> Analysis:
        """The analysis of ``histories.data(events, seed)`` with these flapping thresholds (persisted until the
        session ends: its users must not unpersist it)."""
        key = (events, seed, flap_transitions, flap_window_ms)
        if key not in self._made:
            data = self.histories.data(events, seed)
            self._made[key] = analyze(self.spark.read.parquet(str(data / "status")),
                                      self.spark.read.parquet(str(data / "history")),
                                      flap_transitions=flap_transitions, flap_window_ms=flap_window_ms)
        return self._made[key]

    def unpersist(self) -> None:
        """Free what the analyses persisted."""
        for analysis in self._made.values():
            analysis.unpersist()


@pytest.fixture(scope="session")
def generated_histories(tmp_path_factory: pytest.TempPathFactory) -> GeneratedHistories:
    """The session's generated histories (no Spark needed)."""
    return GeneratedHistories(tmp_path_factory.mktemp("generated"))


@pytest.fixture(scope="session")
def generated_analyses(spark: SparkSession, generated_histories: GeneratedHistories) -> Iterator[GeneratedAnalyses]:
    """The session's analyses of generated histories, freed before the session's Spark stops."""
    analyses = GeneratedAnalyses(spark, generated_histories)
    yield analyses
    analyses.unpersist()
