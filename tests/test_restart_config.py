"""The settings of auto-restart and of the group's membership (``config/act.py``): defaults, and a bad value is a
config error naming its key."""

from __future__ import annotations

import pytest

from status_store.config import build_config
from status_store.errors import ConfigError


def test_off_by_default_restarting_transient_and_unknown_failures() -> None:
    config = build_config({})
    assert config.restart.enabled is False
    assert config.workers.group_id is None
    # Configuration errors are user failures (act/failures.py): no pattern is needed to keep them from restarts.
    assert config.restart.classes == ("transient", "unknown")
    assert config.restart.exclude_trace is None


def test_the_classes_restarted_may_be_widened_or_narrowed() -> None:
    assert build_config({"sidecar.restart.classes": "user, transient,unknown"}).restart.classes == (
        "transient", "user", "unknown")
    assert build_config({"sidecar.restart.classes": "transient"}).restart.classes == ("transient",)


def test_workers_with_and_without_ids() -> None:
    config = build_config({"sidecar.restart.enable": "true", "group.id": "connect-cluster",
                           "sidecar.restart.workers": "http://127.0.0.1:8083/, connect-1.connect:8083=http://10.0.0.6:8083,"
                                                      " https://[::1]"})
    assert dict(config.restart.workers) == {"127.0.0.1:8083": "http://127.0.0.1:8083",
                                            "connect-1.connect:8083": "http://10.0.0.6:8083",
                                            "[::1]:443": "https://[::1]"}
    assert config.workers.group_id == "connect-cluster"


@pytest.mark.parametrize(("settings", "key"), [
    ({"sidecar.restart.enable": "true"}, "sidecar.restart.workers"),
    ({"sidecar.restart.workers": "connect:8083"}, "sidecar.restart.workers"),
    ({"sidecar.restart.workers": "http://h:1,http://h:1"}, "sidecar.restart.workers"),
    ({"sidecar.restart.workers": "http://h:port"}, "sidecar.restart.workers"),
    ({"sidecar.restart.exclude.trace.pattern": "("}, "sidecar.restart.exclude.trace.pattern"),
    ({"sidecar.restart.exclude.connector.pattern": "[a-"}, "sidecar.restart.exclude.connector.pattern"),
    ({"sidecar.restart.max.per.second": "0"}, "sidecar.restart.max.per.second"),
    ({"sidecar.restart.initial.backoff.ms": "5000", "sidecar.restart.max.backoff.ms": "1000"},
     "sidecar.restart.initial.backoff.ms"),
    ({"sidecar.restart.jitter.factor": "2"}, "sidecar.restart.jitter.factor"),
    ({"sidecar.workers.check.interval.ms": "10"}, "sidecar.workers.check.interval.ms"),
    ({"sidecar.restart.enabled": "true"}, "sidecar.restart.enabled"),
    ({"sidecar.restart.classes": "transient,fatal"}, "sidecar.restart.classes"),
])
def test_a_bad_setting_names_its_key(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build_config(settings)
    assert raised.value.key == key
