"""Failure classes (``act/failures.py``) against a corpus of real traces (``tests/failure_traces/``: recorded from
Connect's own and the scripted connectors run by the suite, and composed from the exception classes and messages of
the well-known connector families), and the restart plan on each of them: no ``user`` failure restarted, every
``transient`` one restarted. The same live: tests/test_autorestart_live.py and tests/test_failures_live.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from status_store.act.plan import Exclusions, Phase, RateCap, RestartPlan, Skip, Target
from status_store.client import change_line, rows
from status_store.connect.failures import (
    ACTIONS,
    NO_TRACE,
    FailureClass,
    Family,
    cause_chain,
    classify,
)
from status_store.retry.backoff import AdditiveJitter

CORPUS_DIR = Path(__file__).with_name("failure_traces")
CORPUS: list[dict[str, Any]] = json.loads((CORPUS_DIR / "corpus.json").read_text(encoding="utf-8"))
DEFAULT_CLASSES = frozenset({FailureClass.TRANSIENT, FailureClass.UNKNOWN})


def trace_of(entry: dict[str, Any]) -> str:
    return (CORPUS_DIR / entry["trace"]).read_text(encoding="utf-8")


def test_the_corpus_holds_every_class_recorded_and_composed_traces_and_no_stray_file() -> None:
    assert {entry["class"] for entry in CORPUS} == {c.value for c in FailureClass}
    assert sum(entry["origin"].startswith("recorded:") for entry in CORPUS) >= 5
    listed = {entry["trace"] for entry in CORPUS}
    assert listed == {path.name for path in CORPUS_DIR.glob("*.trace")}
    assert len(listed) == len(CORPUS)


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["trace"].removesuffix(".trace") for entry in CORPUS])
def test_each_trace_of_the_corpus_has_its_class_family_and_cause(entry: dict[str, Any]) -> None:
    trace = trace_of(entry)
    failure = classify(trace)
    assert failure.failure_class.value == entry["class"]
    assert (failure.family.value if failure.family is not None else None) == entry["family"]
    # The cause is one line, from the innermost exception that has a message.
    assert failure.cause is not None
    assert "\n" not in failure.cause
    assert len(failure.cause) <= 200
    innermost = next(t for t in reversed(cause_chain(trace)) if t.message)
    assert failure.cause.startswith(innermost.simple_name + ": ")
    assert failure.action == (ACTIONS[failure.family] if failure.family is not None else failure.action)


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["trace"].removesuffix(".trace") for entry in CORPUS])
def test_the_plan_restarts_every_transient_failure_of_the_corpus_and_no_user_one(entry: dict[str, Any]) -> None:
    plan = RestartPlan(AdditiveJitter(1000, 1000, 2.0, 0.0), AdditiveJitter(1000, 1000, 2.0, 0.0), 3, 60.0,
                       Exclusions(classes=DEFAULT_CLASSES), RateCap(1000.0))
    target = Target("c", 0)
    planned = plan.failed(target, "w:8083", trace_of(entry), 0.0)
    if entry["class"] == "user":
        assert planned is Skip.FAILURE_CLASS
        assert plan.targets[target].phase is Phase.EXCLUDED
        assert plan.due(100.0) == []
    else:
        assert planned == 1.0
        (due,) = plan.due(1.0)
        assert due.target == target


def test_a_setting_may_widen_the_classes_restarted_to_user_failures() -> None:
    plan = RestartPlan(AdditiveJitter(1000, 1000, 2.0, 0.0), AdditiveJitter(1000, 1000, 2.0, 0.0), 3, 60.0,
                       Exclusions(classes=frozenset(FailureClass)), RateCap(1000.0))
    trace = trace_of(next(e for e in CORPUS if e["class"] == "user"))
    assert plan.failed(Target("c", 0), "w:8083", trace, 0.0) == 1.0


def test_the_innermost_exception_that_says_something_decides() -> None:
    # Connect's JDBC sink wraps a refused password in a RetriableException: the password decides, not the wrapper.
    wrapped = ("org.apache.kafka.connect.errors.RetriableException: java.sql.SQLException: boom\n"
               "\tat a.b(C.java:1)\n"
               "Caused by: java.sql.SQLException: FATAL: password authentication failed for user \"u\"\n"
               "\tat d.e(F.java:2)\n")
    failure = classify(wrapped)
    assert (failure.failure_class, failure.family) == (FailureClass.USER, Family.CREDENTIALS)
    assert failure.decided_by == "java.sql.SQLException"
    # A wrapper that says nothing over a cause that says nothing: the wrapper's class decides.
    retriable = ("org.apache.kafka.connect.errors.RetriableException: try later\n\tat a.b(C.java:1)\n"
                 "Caused by: java.lang.IllegalStateException: x\n\tat d.e(F.java:2)\n")
    assert classify(retriable).failure_class is FailureClass.TRANSIENT


def test_messages_of_several_lines_and_suppressed_exceptions() -> None:
    trace = ("org.apache.kafka.connect.errors.ConnectException: first line\nsecond line\n"
             "\tat a.b(C.java:1)\n"
             "\tSuppressed: java.net.ConnectException: Connection refused\n"
             "\t\tat x.y(Z.java:3)\n"
             "Caused by: java.lang.IllegalArgumentException: inner\n"
             "\t... 3 more\n")
    chain = cause_chain(trace)
    assert [(t.exception, t.message) for t in chain] == [
        ("org.apache.kafka.connect.errors.ConnectException", "first line\nsecond line"),
        ("java.lang.IllegalArgumentException", "inner")]
    # The suppressed refused connection is not a cause: nothing decides.
    assert classify(trace).failure_class is FailureClass.UNKNOWN
    assert classify(trace).cause == "IllegalArgumentException: inner"


def test_no_trace_or_a_trace_that_is_not_java_is_unknown() -> None:
    assert classify(None) is NO_TRACE
    assert classify("") is NO_TRACE
    garbled = classify("something went wrong\nand more")
    assert (garbled.failure_class, garbled.cause, garbled.decided_by) == (FailureClass.UNKNOWN,
                                                                          "something went wrong", None)


def test_a_long_cause_is_cut_to_one_line_of_200_characters() -> None:
    failure = classify("java.net.ConnectException: " + "x" * 500 + "\n\tat a.b(C.java:1)")
    assert failure.cause is not None
    assert len(failure.cause) == 200
    assert failure.cause.endswith("…")
    assert failure.failure_class is FailureClass.TRANSIENT


def test_status_and_watch_say_whether_a_restart_can_help() -> None:
    password = trace_of(next(e for e in CORPUS if e["trace"] == "jdbc-postgres-password.trace"))
    info = {"name": "c", "type": "sink", "connector": {"state": "RUNNING", "worker_id": "w:8083"},
            "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w:8083", "trace": password},
                      {"id": 1, "state": "FAILED", "worker_id": "w:8083", "trace": "boom\nat x"}]}
    (_, task0, task1) = rows(info)
    assert task0[3] == ("[user, credentials] org.apache.kafka.connect.errors.ConnectException: java.sql.SQLException: "
                        "Exception chain:")
    assert task1[3] == "boom"  # unknown: the trace's line alone
    skipped = {"kind": "task", "connector": "c", "task": 0, "worker_id": "w:8083", "attempt": None,
               "reason": "SQLException: password authentication failed", "result": "skipped",
               "skipped": "failure_class", "timestamp": 0}
    assert change_line("restart", skipped) == ("1970-01-01T00:00:00Z  task c/0  not restarted by the sidecar "
                                               "(failure_class): SQLException: password authentication failed  "
                                               "worker w:8083")
    failed = {"kind": "task", "connector": "c", "task": 0, "state": "FAILED", "worker_id": "w:8083", "generation": 1,
              "trace": "java.net.ConnectException: Connection refused", "timestamp": 0,
              "failure": {"class": "transient", "family": "network"}}
    assert change_line("status", failed).endswith("Connection refused  (transient failure)")
