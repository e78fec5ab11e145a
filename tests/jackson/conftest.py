"""The Jackson oracle: one JVM for the session, compiled from JacksonOracle.java on first use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .oracle import JacksonOracle, jdk_missing, running_oracle


@pytest.fixture(scope="session")
def jackson(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JacksonOracle]:
    """Connect's reading and writing of status values on real Jackson (skipped only without a JDK)."""
    missing = jdk_missing()
    if missing is not None:
        pytest.skip(missing)
    with running_oracle(tmp_path_factory.mktemp("jackson-oracle")) as oracle:
        yield oracle
