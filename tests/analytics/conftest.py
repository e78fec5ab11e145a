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
