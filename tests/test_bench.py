"""Every benchmark still runs: each one's ``--quick`` (real brokers, real measurements, the same code as a full
run, small sizes) in a fresh process, as a user runs it. What is checked is what each run reports having done
and found, never a timing.

The benchmarks on Spark run beside the analytics tests, on their Java and Spark fixtures:
tests/analytics/test_bench_history.py and tests/analytics/test_spark_cluster.py. Select every quick run with
``pytest -m bench``.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from bench import BenchParser
from bench.outage_report import (
    CONNECT,
    POD,
    Burst,
    DeletionTimes,
    RebalancePhases,
    Revocation,
    creation_phases,
    median_interval,
    median_with_interval,
    print_revocations,
    rebalance_phases,
    report_deletions,
)
from harness import free_port
from harness.events_storm import Probe, Probes

from .bench_runs import run_bounded, run_quick, scripts
from .helpers import eventually_value

pytestmark = [pytest.mark.bench, pytest.mark.timeout(240)]
# Seconds a quick run may take here, on a busy machine, before it counts as hung.
RUN_BOUND_S = 200.0


def rows(output: str, first_cell: str) -> list[list[str]]:
    """The cells of the Markdown table rows in ``output`` whose first cell starts with ``first_cell``."""
    found = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in output.splitlines()
             if line.startswith("|")]
    return [row for row in found if row[0].startswith(first_cell)]


def quick_json(script: str, tmp_path: Path, *arguments: str, timeout: float = RUN_BOUND_S
               ) -> tuple[str, dict[str, Any]]:
    """A quick run with ``--json``: its output, and what it found by name."""
    found = tmp_path / f"{script}.json"
    output = run_quick(script, tmp_path, *arguments, "--json", str(found), timeout=timeout)
    return output, json.loads(found.read_text())


def test_every_benchmark_script_has_a_quick_run_in_the_suite() -> None:
    tests = "".join(path.read_text() for path in Path(__file__).parent.rglob("test_*.py"))
    runs = ("run_quick", "quick_json")
    assert {name for name in scripts() if any(f'{run}("{name}"' in tests for run in runs)} == scripts()


def _running(pid: int, marker: str) -> bool:
    """Whether ``pid`` is still the process that carries ``marker`` in its command line, and not a zombie."""
    try:
        if marker not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            return False
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_quick_run_cut_off_at_its_bound_leaves_no_process_of_its_own(tmp_path: Path) -> None:
    """A quick run that outlasts its bound is killed with every process it started: a benchmark's ``status-store
    analyze`` and its Spark JVM outlived their quick run's bound by minutes, loading every test after it."""
    marker = f"left-behind-{uuid.uuid4().hex}"
    started = tmp_path / "child"
    run = ("import pathlib, subprocess, sys, time\n"
           f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}])\n"
           f"pathlib.Path({str(started)!r}).write_text(str(child.pid))\n"
           "time.sleep(600)\n")
    # Bound: two Python start-ups on a loaded machine; the run itself never ends.
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded([sys.executable, "-c", run], tmp_path, os.environ, timeout=15)
    assert started.exists(), "the run had not started its child within its bound"
    child = int(started.read_text())
    try:
        eventually_value(lambda: _running(child, marker), lambda running: not running, timeout=10,
                         what="the cut-off run's child still running")
    finally:
        if _running(child, marker):
            os.kill(child, signal.SIGKILL)


def test_core_quick_run(tmp_path: Path) -> None:
    output = run_quick("core", tmp_path, timeout=RUN_BOUND_S)
    assert [row[1] for row in rows(output, "read-to-end")] == ["raw", "store"]
    assert [row[1] for row in rows(output, "write until acknowledged")] == [
        "raw", "store", "store with spool", "store with history", "aio"]
    assert [row[1] for row in rows(output, "write until visible")] == ["raw pipeline", "lean sketch", "store"]
    assert "the spool's cost" in output


def test_read_back_quick_run(tmp_path: Path) -> None:
    output = run_quick("read_back", tmp_path, timeout=RUN_BOUND_S)
    sides = rows(output, "the ")
    assert [(row[0], row[1]) for row in sides] == [("the sidecar, PUT ?wait=true", "40"),
                                                   ("the sidecar through httpx", "40"),
                                                   ("the log (plain producer and consumer)", "40"),
                                                   ("the agent's request, until its outcome", "40"),
                                                   ("the log, until acknowledged", "40")], output
    assert "the sidecar against the log: p50 " in output
    assert "the agent's request against the log's acknowledgement: p50 " in output


def test_spool_quick_run(tmp_path: Path) -> None:
    output = run_quick("spool", tmp_path, timeout=RUN_BOUND_S)
    runs = [json.loads(line) for line in output.splitlines()]
    assert [(run["batch"], run["writes"], len(run["rounds"])) for run in runs] == [(1, 1000, 1), (500, 1000, 1)]
    assert all(run["us_per_write"] > 0 and run["cpu_us_per_write"] > 0 for run in runs)


def test_key_values_gather_into_one_dict_and_an_argument_without_equals_is_refused() -> None:
    parser = BenchParser(None)
    parser.add_key_values("--sidecar", help="a setting")
    assert parser.parse([]).sidecar == {}
    assert parser.parse(["--sidecar", "a=1", "--sidecar", "b=x=y", "--sidecar", "a=2"]).sidecar == {"a": "2",
                                                                                                    "b": "x=y"}
    with pytest.raises(SystemExit):
        parser.parse(["--sidecar", "enabled"])


def test_connect_outage_quick_run(tmp_path: Path) -> None:
    # An agent option as the A/A check gives one (enabled=false), here its default: the pod's worker with the agent on.
    output, found = quick_json("connect_outage", tmp_path, "--agent", "enabled=true")
    assert found["agent options"] == {"enabled": "true"}, output
    assert "its agent with enabled=true" in output, output
    workers = ["Connect worker", "the pod (agent + sidecar)"]
    runs = found["outages"]
    assert [run["worker"] for run in runs] == workers, output
    # Every connector went through all five steps (2 connectors) on both workers.
    assert [run["steps"] for run in runs] == [10, 10], output
    # The pod leaves no key stale, in its topic or as its REST API shows them (the output names any).
    stale = ("keys left stale (the topic)", "keys", "stale as its REST API shows them")
    assert [runs[1][column] for column in stale] == [0, 6, 0], output
    # The burst: both workers brought every connector up and deleted every one.
    assert [burst["worker"] for burst in found["bursts"]] == workers
    assert "the pod against the Connect worker: until RUNNING" in output
    # The creations in parts, on both workers: every task's start found in its log, every RUNNING in its topic.
    assert "the pod's gap, tasks started:" in output, output
    assert "the pod's gap, then in the topic:" in output, output
    assert "CPU seconds of a creation burst, the pod's sidecar (median):" in output, output
    # Each worker's deletions, from its own log: a revocation each (two at most: two connectors), both parts timed.
    assert all(1 <= burst["revocations"] <= 2 and burst["of which tasks stopping (s)"] > 0
               and burst["of which status store flushes (s)"] >= 0 for burst in found["bursts"]), output
    # The deletions' Produce requests as the proxies saw them: a stock worker's status producer keeps one request in
    # flight (Connect's max.in.flight.requests.per.connection=1), so none of its went behind another.
    assert re.search(r"Connect worker, Produce requests of its status writes during the deletions \(as the brokers' "
                     r"proxies saw them\): [1-9][0-9]*; answered [0-9.]+ ms at the median when sent alone on their "
                     r"connection, 0 sent while another", output), output
    assert "the pod (agent + sidecar), Produce requests of its status writes during the deletions" in output, output
    # A round of status changes on each, each shown by its worker's own REST API.
    assert [(change["change"], change["times"]) for change in found["status changes"]] == [
        ("pause", 1), ("resume", 1), ("restart", 1), ("every change", 3)], output


def test_rebalance_phases_sum_each_revocations_tasks_stopping_and_its_flush() -> None:
    lines = """[2026-11-30 03:08:55,320] INFO Connector b-c0 config removed (x)
[2026-11-30 03:08:55,329] INFO Stopping task b-c0-1 (x)
[2026-11-30 03:08:55,330] INFO Stopping task b-c0-0 (x)
\tname = b-c0
[2026-11-30 03:08:55,505] INFO Finished stopping tasks in preparation for rebalance (x)
[2026-11-30 03:08:55,521] INFO Finished flushing status backing store in preparation for rebalance (x)
[2026-11-30 03:08:55,538] INFO Finished stopping tasks in preparation for rebalance (x)
[2026-11-30 03:08:55,540] INFO Finished flushing status backing store in preparation for rebalance (x)
[2026-11-30 03:08:55,571] INFO Stopping task b-c1-2 (x)
[2026-11-30 03:08:55,755] INFO Finished stopping tasks in preparation for rebalance (x)
[2026-11-30 03:08:55,764] INFO Finished flushing status backing store in preparation for rebalance (x)
""".splitlines()
    # A rebalance that stopped no task (the one after each deletion) is not a revocation of the burst's.
    assert rebalance_phases(lines) == RebalancePhases(2, pytest.approx(0.176 + 0.184), pytest.approx(0.016 + 0.009),
                                                      pytest.approx(0.176 + 0.184))


def test_rebalance_phases_split_each_stop_at_its_last_tasks_producer_closing_and_count_the_rebalances() -> None:
    lines = """[2026-11-30 20:23:02,639] INFO [Worker] Joined group at generation 38 with protocol version 2 (x)
[2026-11-30 20:23:02,710] INFO Stopping task b-c0-1 (x)
[2026-11-30 20:23:02,712] INFO Stopping task b-c0-0 (x)
[2026-11-30 20:23:02,906] INFO [Producer clientId=connector-producer-b-c0-1] Closing the Kafka producer (x)
[2026-11-30 20:23:02,915] INFO [Producer clientId=connector-producer-b-c0-0] Closing the Kafka producer (x)
[2026-11-30 20:23:02,950] INFO [Producer clientId=outage-statuses] Closing the Kafka producer (x)
[2026-11-30 20:23:03,132] INFO Finished stopping tasks in preparation for rebalance (x)
[2026-11-30 20:23:03,148] INFO Finished flushing status backing store in preparation for rebalance (x)
[2026-11-30 20:23:03,149] INFO [Worker] Joined group at generation 39 with protocol version 2 (x)
[2026-11-30 20:23:03,326] INFO Stopping task b-c1-0 (x)
[2026-11-30 20:23:03,400] INFO Finished stopping tasks in preparation for rebalance (x)
[2026-11-30 20:23:03,410] INFO Finished flushing status backing store in preparation for rebalance (x)
""".splitlines()
    # The polls: until the last task producer's close (not another producer's); a stop with no task producer closing
    # in the log counts whole.
    phases = rebalance_phases(lines)
    assert phases == RebalancePhases(
        2, pytest.approx(0.422 + 0.074), pytest.approx(0.016 + 0.010), pytest.approx(0.205 + 0.074), 2)
    # Each revocation alone: its flush, its polls, and from the revocation before's flush to its first stop.
    assert [(r.flush_ms, r.polls_ms, r.since_flush_ms) for r in phases.each] == [
        pytest.approx((16, 205, None)), pytest.approx((10, 74, 178))]


def test_deletions_in_parts_give_the_pods_gap_in_each_part_and_the_ratio_less_the_tasks_polls(
        capsys: pytest.CaptureFixture[str]) -> None:
    def burst(delete_s: float, polls_s: float, flushing_s: float) -> Burst:
        return Burst(2.0, 80, delete_s, RebalancePhases(20, polls_s + 0.1, flushing_s, polls_s, 40),
                     deletion=DeletionTimes(delete_s - 0.2, delete_s - 0.1))
    report_deletions([{POD: burst(3.0, 2.0, 0.2), CONNECT: burst(2.5, 1.6, 0.1)},
                      {POD: burst(2.2, 1.3, 0.2), CONNECT: burst(2.6, 1.6, 0.1)}])
    printed = capsys.readouterr().out
    # The pod's polls: +400 and -300 ms, its flushes +100 ms in each burst; less the polls 1.0/0.9 and 0.9/1.0.
    assert "the pod's deletion gap, polls ending: +400, -300 ms (median +50 ms)" in printed
    assert "the pod's deletion gap, flushes: +100, +100 ms (median +100 ms)" in printed
    assert "the pod's deletion gap, every one 404: +500, -400 ms (median +50 ms)" in printed
    assert "less the tasks' polls, the pod against the Connect worker: 1.11x, 0.90x (median 1.01x)" in printed


def test_revocations_are_told_by_their_medians_and_those_that_waited_out_nearly_a_whole_poll(
        capsys: pytest.CaptureFixture[str]) -> None:
    # A few ms more between revocations moved a revocation past its tasks' poll boundary: it waited out nearly a
    # whole poll (the pod's deletions 1.24-1.29x on a quiet machine, its revocations 6-8 ms slower).
    def burst(*each: Revocation) -> Burst:
        return Burst(2.0, 80, 3.0, RebalancePhases(len(each), 1.0, 0.1, 0.9, 40, each),
                     deletion=DeletionTimes(2.8, 2.9))
    pod = burst(Revocation(7, 190, None), Revocation(6, 30, 25), Revocation(8, 160, 24))
    stock = burst(Revocation(4, 20, None), Revocation(3, 40, 21), Revocation(4, 195, 22))
    print_revocations([{POD: pod, CONNECT: stock}])
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        f"{POD}, per revocation (median of 3): flush 7 ms, from the flush of the revocation before 24 ms, the tasks' "
        "polls 160 ms; polls of 150-250 ms (nearly a whole poll): 2 of 3",
        f"{CONNECT}, per revocation (median of 3): flush 4 ms, from the flush of the revocation before 22 ms, the "
        "tasks' polls 40 ms; polls of 150-250 ms (nearly a whole poll): 1 of 3"]


def test_a_median_ratio_comes_with_the_interval_its_bursts_give_it() -> None:
    # Twelve bursts of one run put the pod's deletion at 1.01x in one run and 1.18x in the next, the same code: a
    # median of twelve says little alone. The sign test's interval: the 3rd and 10th of 12 (96 %), the 7th and
    # 18th of 24 (97.7 %), the least and the most of 6 (96.9 %); fewer than 6 give none at 95 %.
    twelve = [1.04, 1.30, 1.23, 0.87, 1.50, 1.24, 1.38, 1.55, 1.47, 1.60, 0.95, 1.05]
    low, high, coverage = median_interval(twelve) or (0.0, 0.0, 0.0)
    assert (low, high, round(coverage, 4)) == (1.04, 1.50, 0.9614)
    assert median_interval(list(range(24)))[:2] == (6, 17)  # type: ignore[index]
    assert median_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0])[:2] == (1.0, 6.0)  # type: ignore[index]
    assert median_interval([1.0] * 5) is None
    assert median_with_interval(twelve) == "median 1.27x; 96% interval of the median 1.04-1.50x"
    assert median_with_interval([1.0, 1.2]) == "median 1.10x"


def test_creation_phases_count_the_rebalances_and_find_the_last_of_the_bursts_tasks_started() -> None:
    lines = """[2026-11-30 16:42:01,808] INFO [Worker] Joined group at generation 7 with protocol version 2 (x)
[2026-11-30 16:42:01,978] INFO WorkerSourceTask{id=b-c1-0} Source task finished initialization and start (x)
[2026-11-30 16:42:02,092] INFO [Worker] Joined group at generation 8 with protocol version 2 (x)
[2026-11-30 16:42:02,250] INFO WorkerSourceTask{id=b-c10-2} Source task finished initialization and start (x)
[2026-11-30 16:42:02,300] INFO WorkerSourceTask{id=other-c1-0} Source task finished initialization and start (x)
""".splitlines()
    began = datetime.datetime(2026, 11, 30, 16, 42, 1, 500000).timestamp()
    # b-c10's task is the burst's last; a task of another connector is not the burst's.
    assert creation_phases(lines, began, ["b-c1", "b-c10"]) == (2, pytest.approx(0.750))
    assert creation_phases(lines, began, ["b-c1"]) == (2, pytest.approx(0.478))
    assert creation_phases(lines[:1], began, ["b-c1"]) == (1, None)


def test_connect_store_quick_run(tmp_path: Path) -> None:
    output = run_quick("connect_store", tmp_path, timeout=RUN_BOUND_S)
    writers = ["KafkaStatusBackingStore", "status-store"]
    assert [row[1] for row in rows(output, "until acknowledged")] == ["raw produce loop", *writers]
    assert [row[1] for row in rows(output, "until visible")] == ["raw pipeline", *writers]
    # Connect's store and status-store wrote the same bytes for the same statuses.
    assert "both stores wrote the same records: yes" in output
    assert [row[0] for row in rows(output, "KafkaStatusBackingStore,")] == [
        "KafkaStatusBackingStore, fresh JVM", "KafkaStatusBackingStore, warm JVM"]
    # (c): both stores read the same fleet, each in a fresh process.
    assert [row[0] for row in rows(output, "fleet: ")] == [
        "fleet: KafkaStatusBackingStore, fresh JVM", "fleet: status-store StatusStore"]


def test_retry_quick_run(tmp_path: Path) -> None:
    _, found = quick_json("retry", tmp_path)
    assert {"pressure", "partial outage", "memory", "scheduler scale"} <= set(found)
    pressure = [row for row in found["pressure"] if row["writer"].startswith("status-store,")]
    assert len(pressure) == 2
    # No stale retry landed after a newer value, and no latest value was given up.
    assert [(row["keys left stale"], row["latest values given up"]) for row in pressure] == [(0, 0), (0, 0)]


def test_fleet_quick_run(tmp_path: Path) -> None:
    chart = tmp_path / "fleet.png"
    _, found = quick_json("fleet", tmp_path, "--chart", str(chart))
    variants = [row for row in found["variants"] if row["variant"].startswith(("per update", "held partitions"))]
    assert len(variants) == 9
    # Parked updates are sent again when the broker takes writes: every key is written in the end.
    assert all(row["all written (s after recovery)"] is not None for row in variants)
    assert chart.read_bytes().startswith(b"\x89PNG")


def test_soak_quick_run(tmp_path: Path) -> None:
    _, found = quick_json("soak", tmp_path)
    policies = found["policies"]
    assert sorted(policy["policy"] for policy in policies) == ["dead-letter", "drop", "park + spool"]
    # The counters add up, and no update was lost without its failure being counted.
    assert [(policy["counters add up"], policy["lost: silent"]) for policy in policies] == [(True, 0)] * 3


def test_rest_api_quick_run(tmp_path: Path) -> None:
    output = run_quick("rest_api", tmp_path, timeout=RUN_BOUND_S)
    for measurement in ("single writes", "batch writes", "read p50 under write load", "read p99 under write load"):
        assert len(rows(output, measurement)) == 1


def test_history_gen_quick_run(tmp_path: Path) -> None:
    run_quick("history_gen", tmp_path, str(tmp_path / "history"), timeout=RUN_BOUND_S)
    assert list((tmp_path / "history" / "history").glob("*.parquet"))
    assert (tmp_path / "history" / "status" / "part-00000.parquet").exists()


def test_pandas_history_quick_run(tmp_path: Path) -> None:
    output = run_quick("pandas_history", tmp_path, timeout=RUN_BOUND_S)
    counts = dict(re.findall(r"(\w+) ([\d,]+)", output.split("rows:")[1]))
    assert set(counts) == {"latest", "state_durations", "episodes", "mttr", "flapping", "retry_outcomes", "garbled"}
    assert all(int(count.replace(",", "")) > 0 for count in counts.values())


def test_fleet_scrape_quick_run(tmp_path: Path) -> None:
    output = run_quick("fleet_scrape", tmp_path, timeout=RUN_BOUND_S)
    lines = [line for line in output.splitlines() if "series," in line]
    assert [line.split()[0] for line in lines] == ["objects", "objects", "counts"]
    # 100 connectors x (10 tasks + 1): every object has its series when no cap is reached.
    assert int(lines[0].split(":")[1].split()[0].replace(",", "")) > 1100


def test_fleet_read_quick_run(tmp_path: Path) -> None:
    output = run_quick("fleet_read", tmp_path, timeout=RUN_BOUND_S)
    assert [row[0] for row in rows(output, "o")] == ["off", "objects", "objects + events"]


def test_events_fanout_quick_run(tmp_path: Path) -> None:
    output = run_quick("events_fanout", tmp_path, timeout=RUN_BOUND_S)
    assert [row[0] for row in rows(output, "1")] == ["1", "10"]
    assert "clients dropped: 0" in output


def test_events_storm_quick_run(tmp_path: Path) -> None:
    _, found = quick_json("events_storm", tmp_path)
    phases = found["phases"]
    assert [phase["phase"] for phase in phases] == ["baseline: no subscriber", "storm: 150 clients connecting",
                                                    "storm: write batch, the subscribed clients there"]
    # Every write and every probe answered; the clients past the bound refused with a time to come back.
    assert [phases[0]["writes not 2xx"], phases[2]["writes not 2xx"]] == [0, 0]
    assert [phase["/health not 200"] for phase in phases] == [0, 0, 0]
    assert all(phase["/health probes"] > 0 for phase in phases)
    clients = found["clients (last round)"]
    assert (clients["subscribed"], clients["refused (503)"], clients["refused with Retry-After"]) == (100, 50, 50)


def test_a_probe_that_waits_through_a_phase_is_that_phases() -> None:
    """A phase's probes are those in flight during it: the connecting phase of a quick storm can pass while one probe
    waits in the listen queue (a whole-suite run saw a phase of no probe at all, so its "every probe answered" held of
    none)."""
    samples = [(10.0, 200, 0.01), (10.5, 200, 2.0), (12.6, 200, 0.01), (13.0, 0, 0.5)]
    assert Probes.between(samples, 11.0, 12.0) == Probes([2.0], 0)
    assert Probes.between(samples, 10.0, 10.4) == Probes([0.01], 0)
    assert Probes.between(samples, 12.55, 14.0) == Probes([0.01, 0.5], 1)


def test_a_probe_process_has_probed_once_it_is_started() -> None:
    """The storm's /health probes run in a process of their own, which takes seconds to start on a loaded machine: a
    whole-suite run at a load of 35 saw the quick storm's baseline phase pass before the first probe. ``Probe`` returns
    once a probe was made (here against a port nobody listens on: a refused probe, status 0), so even a probe process
    stopped at once has probed."""
    samples = Probe(free_port()).stop()
    assert samples
    assert all(status == 0 for _, status, _ in samples)


def test_ui_quick_run(tmp_path: Path) -> None:
    if shutil.which("chromium") is None:
        pytest.skip("needs Debian's chromium (./scripts/test.sh installs it)")
    output = run_quick("ui", tmp_path, timeout=RUN_BOUND_S)
    for figure in ("first render", "baseline GET /fleet alone", "record written -> row updated",
                   "baseline record -> GET .../status"):
        assert figure in output
    assert "page over baseline (medians)" in output


def test_fleet_release_tuning_changes_the_held_partitions_release(tmp_path: Path) -> None:
    default = rows(run_quick("fleet", tmp_path, "--only", "held", timeout=RUN_BOUND_S), "held partitions")
    tuned = rows(run_quick("fleet", tmp_path, "--only", "held", "--release", "1,100", timeout=RUN_BOUND_S),
                 "held partitions")
    assert len(default) == len(tuned) == 1
    assert tuned != default


@pytest.mark.timeout(480)
def test_autorestart_quick_run(tmp_path: Path) -> None:
    # Two Connect workers start: longer than the others.
    output, found = quick_json("autorestart", tmp_path, timeout=420.0)
    # A fail-once task, then a sink whose downstream is away: the sidecar restarted each.
    assert [row["restarted by"] for row in found["transient"]] == ["auto-restart (sidecar)",
                                                                  "poll every 6 s (baseline)"], output
    downstream = {row["restarted by"]: row for row in found["downstream"]}
    assert list(downstream) == ["auto-restart (sidecar)", "Strimzi's rule (simulated)",
                                "the stock worker (nothing restarts it)"], output
    assert downstream["the stock worker (nothing restarts it)"]["median"] is None  # never
    # The quick run watches the stock worker's sink 10 s after its downstream is back (a full run, 60 s): still FAILED,
    # while the sidecar's was restarted within seconds of it.
    assert "- stock worker, run 1: FAILED 16 s after the failure" in output, output
    # The user failure: no restart request.
    (user,) = found["user"]
    assert (user["restart requests received"], user["class"], user["family"], user["not restarted because"]) == (
        0, "user", "data", "failure_class"), output
    # Each task of the storm restarted once, by one sidecar, and by the poller.
    sidecars, poller = found["storm"]
    assert (sidecars["restarted by"], sidecars["tasks restarted"], sidecars["tasks"]) == (
        "sidecars (2), auto-restart", 20, 20), output
    assert poller["restarted by"] == "poll every 6 s (baseline)"
    assert [row["flagged by"] for row in found["hung"]] == ["the sidecar (worker stuck)", "Connect's REST API"]
    assert [row["flagged by"] for row in found["killed"]] == ["the sidecar (worker gone)",
                                                              "Connect's REST API (no longer RUNNING on it)"]


def test_fleet_scale_quick_run(tmp_path: Path) -> None:
    _, found = quick_json("fleet_scale", tmp_path)
    answers = found["answers"]
    assert [answer["answer"] for answer in answers] == ["/fleet", "/connectors?expand=status"]
    # Each client at once shared one build (one round in a quick run).
    assert [answer["builds for the clients at once"] for answer in answers] == [[1], [1]]
    assert found["memory per status (bytes)"] > 0
