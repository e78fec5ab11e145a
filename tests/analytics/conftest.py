"""One local Spark for the whole session, tuned to start fast on a small machine."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from status_store.analytics.session import get_session

FAST_START = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    # A short-lived test JVM: a small, quick collector and the fast compiler only.
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto",
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
    """A local[2] session with 4 shuffle partitions, no UI, bound to 127.0.0.1."""
    session = get_session(FAST_START, app_name="status-store-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
