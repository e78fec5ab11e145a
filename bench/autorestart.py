"""Benchmark what the sidecar does about what the topic shows, on Apache Kafka with two real Connect 4.4.0 workers and
a sidecar beside each (harness/restart_pod.py: each worker's REST API behind a proxy that notes every request's time).

    .venv/bin/python -m bench.autorestart [--runs 3] [--poll-seconds 60] [--storm-tasks 100]
                                          [--rebalance-delay-ms 300000] [--sidecar KEY=VALUE ...] [--quick]
                                          [--parts transient,storm,killed,downstream,user,hung]

1. **A transient failure, FAILED to RUNNING.** A task that fails its first run, 5 s after its connector is made, and
   runs once restarted (the scripted connector's ``fail-once``). With auto-restart: the sidecar beside its worker
   restarts it (the defaults: 10 s, up to 25 % more). Baseline, the same run: what an operator's poll gives, as
   Conduktor's auto-restart does it: a loop that reads ``GET /connectors?expand=status`` every ``--poll-seconds`` (60)
   and restarts each FAILED task it finds (``POST /connectors/{c}/tasks/{n}/restart``); a failure waits for its next
   check (a poller per failure, its first check at a random phase in its interval from the failure, as a failure comes
   at any moment of a cron's minute). The sidecars leave the baseline's connectors alone
   (``sidecar.restart.exclude.connector.pattern=poll-.*``). Measured with Connect's own REST API, asked every 100 ms:
   from the task seen FAILED to seen RUNNING; a recovery whose restarter sent no restart is an error, not a figure.
2. **A storm.** ``--storm-tasks`` tasks of one connector fail at one moment (``scripted.fail.at.ms``), as when a
   downstream system goes away: the restart requests the workers received (each task once), their spread, the most
   in any second against ``sidecar.restart.max.per.second``, and the time until all run again. Baseline: the poller
   sends its restarts for all of them in one burst.
3. **A killed worker.** A connector's tasks run on both workers; one worker is SIGKILLed. Seconds until the sidecar
   beside the other marks the dead worker's tasks gone (``GET /fleet``'s ``worker_gone_since``), against seconds until
   Connect's own REST API stops saying they run on it (at the delayed rebalance, ``scheduled.rebalance.max.delay.ms``:
   Connect's 5 minutes unless ``--rebalance-delay-ms``).
4. **A transient fault: a sink whose downstream is away** for ``--away-seconds`` (20): the scripted sink fails on
   the refused TCP connection (a ``transient`` failure), the downstream comes back. Seconds from FAILED to RUNNING
   with the sidecar's auto-restart; against the stock worker (a connector the sidecars leave alone, ``stock-``: nothing
   restarts it, it is still FAILED ``--stock-watch-seconds`` (60) after the downstream is back); and against Strimzi's
   rule simulated on the same timeline (its first restart at its next reconcile, every 2 minutes at a random phase,
   then ``min(n*n + n, 60)`` minutes after restart n: the first of its restarts after the downstream is back, plus the
   time a restart took to reach RUNNING in the sidecar's run; ``--strimzi-phases`` phases per run).
5. **A user fault never restarted.** A sink whose converter cannot read its record (Connect's JsonConverter on a
   record that is not JSON): the restart requests the workers receive in ``--user-watch-seconds`` (0), and why.
6. **A hung worker.** A connector whose ``taskConfigs()`` blocks the worker's herder thread: seconds from its creation
   until the sidecar marks the worker stuck (``GET /fleet``'s ``stuck_since``, with the sidecars'
   ``sidecar.workers.stuck.after.ms``), and what its ``GET /health`` said.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench import BenchParser, load_average, write_json
from bench.restart_baselines import POLLED, STRIMZI_RECONCILE_S, Poller, strimzi_restarts
from harness.downstream import Downstream
from harness.java_process import SINK_CONNECTOR, SOURCE_CONNECTOR, kafka_line, wait_until
from harness.real_connect import ConnectCluster, all_in
from harness.real_kafka import KafkaCluster
from harness.restart_pod import RestartPod

# Connect's REST API is asked this often while a figure is timed.
ASK_INTERVAL_S = 0.1
# A transient failure comes this long after its connector is made (``scripted.fail.at.ms``), once the connector has
# started: a task failing in its first start may be stopped and started again by Connect itself, as the herder handles
# the connector's first task configs ("Handling task config update by stopping tasks [...], which will be restarted
# after rebalance"), RUNNING with nobody's restart (7 runs of 25 at load 8-13).
FAIL_AFTER_S = 5.0
# Connectors the sidecars leave alone: the stock worker's baseline (nothing restarts them).
STOCK = "stock-"
PARTS = ("transient", "downstream", "user", "hung", "storm", "killed")


def source(tasks: int, settings: dict[str, str]) -> dict[str, str]:
    return {"connector.class": SOURCE_CONNECTOR, "tasks.max": str(tasks), **settings}


def seen(connect: ConnectCluster, connector: str, condition: Callable[[dict[str, Any]], bool], timeout: float
         ) -> float:
    """When Connect's REST API (asked every 100 ms) first answers a status ``condition`` accepts (time.monotonic)."""
    found: list[float] = []

    def holds() -> bool:
        answer = connect.request("GET", f"/connectors/{connector}/status")
        if answer.status == 200 and condition(answer.json()):
            found.append(time.monotonic())
        return bool(found)

    wait_until(holds, timeout, f"{connector}: a status", interval=ASK_INTERVAL_S)
    return found[0]


def any_failed(status: dict[str, Any]) -> bool:
    return any(task["state"] == "FAILED" for task in status["tasks"])


def transient(pod: RestartPod, runs: int, poll_s: float, rng: random.Random) -> dict[str, list[float]]:
    """Seconds from FAILED to RUNNING of a fail-once task: restarted by the sidecar, and by the poller."""
    connect = pod.connect
    figures: dict[str, list[float]] = {"auto-restart (sidecar)": [], f"poll every {poll_s:g} s (baseline)": []}
    for run in range(runs):
        for label, name in zip(figures, (f"auto-{run}", f"{POLLED}{run}"), strict=True):
            fail_at = time.time() + FAIL_AFTER_S
            connect.call("PUT", f"/connectors/{name}/config", source(1, {
                "scripted.task": "fail-once", "scripted.fail.at.ms": str(int(fail_at * 1000))}))
            failed = seen(connect, name, any_failed, FAIL_AFTER_S + 60.0)
            # A poller of its own for each failure, its first check at a random phase of its interval from the failure
            # seen: a failure comes at any moment of a cron's minute. Started before, it could find the task FAILED
            # and have it RUNNING again between two looks here, and the failure was never seen.
            poller = Poller(connect, poll_s, rng) if name.startswith(POLLED) else None
            if poller is not None:
                poller.start()
            try:
                running = seen(connect, name, all_in("RUNNING", 1), poll_s * 2 + 60.0)
            finally:
                if poller is not None:
                    poller.stop()
            # The figure is the restarter's only if the restarter sent the restart.
            sent = poller.sent if poller is not None else [at for at, _, _ in pod.restarts(name)]
            if not sent:
                raise RuntimeError(f"{name}: FAILED, then RUNNING {running - failed:.1f} s later, but {label} sent no "
                                   "restart: something else restarted it, and the figure would not be its")
            figures[label].append(running - failed)
            connect.call("DELETE", f"/connectors/{name}")
    return figures


def storm(pod: RestartPod, tasks: int, poll_s: float, rng: random.Random) -> list[dict[str, Any]]:
    """The restart requests of ``tasks`` tasks failing at once: the sidecars', then the poller's (a row of the table
    each)."""
    rows = []
    connect = pod.connect
    for name in ("storm", f"{POLLED}storm"):
        fail_at = time.time() + 10 + tasks / 10
        connect.call("PUT", f"/connectors/{name}/config", source(tasks, {
            "scripted.task": "fail-once", "scripted.fail.at.ms": str(int(fail_at * 1000))}))
        seen(connect, name, all_in("RUNNING", tasks), 120.0)
        poller = Poller(connect, poll_s, rng) if name.startswith(POLLED) else None
        sent = poller.sent if poller is not None else None
        if poller is not None:
            poller.start()

        def restarted(status: dict[str, Any], name: str = name, sent: list[float] | None = sent) -> bool:
            count = len(sent) if sent is not None else len(pod.restarts(name))
            return all_in("RUNNING", tasks)(status) and count >= tasks

        try:
            recovered = seen(connect, name, restarted, fail_at - time.time() + poll_s * 2 + 120.0)
        except TimeoutError as e:
            raise TimeoutError(f"{e}; {not_restarted(pod, name, sent)}") from None
        finally:
            if poller is not None:
                poller.stop()
        took = recovered - time.monotonic() + time.time() - fail_at
        if poller is None:
            requests = pod.restarts(name)
            times = [at for at, _, _ in requests]
            most = [busiest([at for at, i, _ in requests if i == index]) for index in range(2)]
            who, restarted_tasks = "sidecars (2), auto-restart", len({task for _, _, task in requests})
        else:
            times = poller.sent
            most, who, restarted_tasks = [busiest(times)], f"poll every {poll_s:g} s (baseline)", len(times)
        rows.append({"restarted by": who, "requests": len(times), "tasks restarted": restarted_tasks, "tasks": tasks,
                     "first after the failure (s)": times[0] - fail_at, "spread (s)": times[-1] - times[0],
                     "most in a second (each sender)": most, "all RUNNING after (s)": took})
        connect.call("DELETE", f"/connectors/{name}")
    return rows


def not_restarted(pod: RestartPod, name: str, sent: list[float] | None) -> str:
    """What a storm that did not recover shows: each task not RUNNING as Connect's REST API and the sidecar beside its
    worker say it, and the restart requests the workers received (the poller's sent), so that a failure names its
    cause."""
    status = pod.connect.request("GET", f"/connectors/{name}/status")
    if status.status != 200:
        return f"GET /connectors/{name}/status answered {status.status}"
    requests = pod.restarts(name)
    said = []
    for task in status.json()["tasks"]:
        if task["state"] == "RUNNING":
            continue
        restarts = None
        if sent is None and task.get("worker_id") in [w.worker_id for w in pod.connect.workers]:
            sidecar, _ = pod.of(task["worker_id"])
            entry = next((c for c in sidecar.call("GET", "/fleet")["connectors"] if c["name"] == name), None)
            found = next((t for t in entry["tasks"] if t["id"] == task["id"]), None) if entry is not None else None
            restarts = found["restarts"] if found is not None else "not in its /fleet"
        requested = sum(1 for _, _, n in requests if n == str(task["id"]))
        said.append(f"task {task['id']} {task['state']} on {task.get('worker_id')}, {requested} restart requests, "
                    f"its sidecar's restarts: {restarts}")
    counted = len(sent) if sent is not None else len(requests)
    return f"{counted} restart requests in all; " + ("; ".join(said) or "every task RUNNING")


def figures_row(label: str, values: list[float]) -> dict[str, Any]:
    """A row of figures in seconds: median, min, max and each; printed with up to 10 of each."""
    row = {"restarted by": label, "median": statistics.median(values), "min": min(values), "max": max(values),
           "each": values}
    print(f"| {label} | {row['median']:.1f} | {row['min']:.1f} | {row['max']:.1f} | "
          + ", ".join(f"{v:.1f}" for v in values[:10]) + " |")
    return row


def busiest(times: list[float]) -> int:
    """The most of these times in any second."""
    return max((sum(1 for t in times if start <= t < start + 1.0) for start in times), default=0)


def killed(pod: RestartPod, delay_ms: int) -> tuple[float, float]:
    """Seconds from SIGKILL until the sidecar marks the dead worker's tasks gone, and until Connect's REST API stops
    saying they run on it."""
    connect = pod.connect
    connect.call("PUT", "/connectors/zombie/config", source(4, {}))
    status = connect.wait_for_status("zombie", all_in("RUNNING", 4), "running", timeout=120.0)
    victim = connect.workers[1]
    survivor, _ = pod.of(connect.workers[0].worker_id)
    on_victim = [t["id"] for t in status["tasks"] if t["worker_id"] == victim.worker_id]
    assert on_victim, f"no task on {victim.worker_id}: {status}"
    killed_at = time.monotonic()
    victim.kill()

    def marked() -> bool:
        fleet = survivor.call("GET", "/fleet")
        entry = next(c for c in fleet["connectors"] if c["name"] == "zombie")
        return all(entry["tasks"][n]["worker_gone_since"] is not None for n in on_victim)

    wait_until(marked, 120.0, "marked gone", interval=ASK_INTERVAL_S)
    flagged = time.monotonic() - killed_at

    def moved() -> bool:
        answer = connect.workers[0].request("GET", "/connectors/zombie/status")
        return answer.status == 200 and all(t["worker_id"] != victim.worker_id or t["state"] != "RUNNING"
                                            for t in answer.json()["tasks"] if t["id"] in on_victim)

    wait_until(moved, delay_ms / 1000 + 120.0, "Connect's REST API no longer says RUNNING on the dead worker",
               interval=ASK_INTERVAL_S * 5)
    return flagged, time.monotonic() - killed_at


def downstream_away(pod: RestartPod, kafka: KafkaCluster, runs: int, away_s: float, stock_watch_s: float,
                    phases: int, rng: random.Random) -> tuple[dict[str, list[float]], list[str]]:
    """Seconds from FAILED to RUNNING of a sink whose downstream is away for ``away_s``: restarted by the sidecar, by
    Strimzi's rule on the same timeline, and by nobody (the stock worker, watched until ``stock_watch_s`` after the
    downstream is back)."""
    connect = pod.connect
    figures: dict[str, list[float]] = {"auto-restart (sidecar)": [], "Strimzi's rule (simulated)": []}
    notes = []
    topic = f"downstream-input-{rng.randrange(1 << 30)}"
    kafka.create_topic(topic, 1, 1)
    for run in range(runs):
        for name in (f"away-{run}", f"{STOCK}away-{run}"):
            downstream = Downstream()
            connect.call("PUT", f"/connectors/{name}/config", {
                "connector.class": SINK_CONNECTOR, "tasks.max": "1", "topics": topic,
                "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                "scripted.downstream": downstream.address})
            try:
                failed = seen(connect, name, any_failed, 60.0)
                failed_wall = time.time() - (time.monotonic() - failed)
                back = threading.Timer(max(0.0, away_s - (time.monotonic() - failed)), downstream.open)
                back.start()
                if name.startswith(STOCK):
                    # Nobody restarts it: FAILED still, well after the downstream is back.
                    watch = away_s + stock_watch_s
                    time.sleep(max(0.0, failed + watch - time.monotonic()))
                    answer = connect.request("GET", f"/connectors/{name}/status").json()
                    notes.append(f"stock worker, run {run + 1}: {answer['tasks'][0]['state']} {watch:.0f} s after the "
                                 f"failure ({away_s:.0f} s after it the downstream was back), no restart sent")
                else:
                    running = seen(connect, name, all_in("RUNNING", 1), away_s + 600.0)
                    figures["auto-restart (sidecar)"].append(running - failed)
                    restarts = [at for at, _, _ in pod.restarts(name)]
                    # A restart reaches RUNNING this long after its request, measured in this run.
                    took = (running - failed) - (restarts[-1] - failed_wall) if restarts else 0.0
                    for _ in range(phases):
                        first_after = next(at for at in strimzi_restarts(0.0, rng.uniform(0, STRIMZI_RECONCILE_S))
                                           if at >= away_s)
                        figures["Strimzi's rule (simulated)"].append(first_after + max(0.0, took))
                    notes.append(f"sidecar, run {run + 1}: {len(restarts)} restart requests, the last "
                                 f"{max(0.0, took):.1f} s before RUNNING")
                back.join()
            finally:
                downstream.close()
                connect.call("DELETE", f"/connectors/{name}")
    return figures, notes


def user_fault(pod: RestartPod, kafka: KafkaCluster, watch_s: float) -> dict[str, Any]:
    """A sink whose converter cannot read its record: the restart requests its worker received in ``watch_s``, and
    why none was sent (a row of the table)."""
    connect = pod.connect
    topic = f"not-json-{random.randrange(1 << 30)}"
    kafka.create_topic(topic, 1, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "log_level": 0})
    producer.produce(topic, b"hello, not JSON")
    producer.flush(15)
    connect.call("PUT", "/connectors/unreadable/config", {
        "connector.class": SINK_CONNECTOR, "tasks.max": "1", "topics": topic,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "true"})
    try:
        seen(connect, "unreadable", any_failed, 60.0)
        time.sleep(watch_s)
        worker = connect.request("GET", "/connectors/unreadable/status").json()["tasks"][0]["worker_id"]
        sidecar, _ = pod.of(worker)
        entry = next(c for c in sidecar.call("GET", "/fleet")["connectors"] if c["name"] == "unreadable")
        failure, restarts = entry["tasks"][0]["failure"], entry["tasks"][0]["restarts"] or {}
        return {"restart requests received": len(pod.restarts("unreadable")), "watched (s)": watch_s,
                "class": failure["class"], "family": failure["family"],
                "not restarted because": restarts.get("skipped"), "cause": failure["cause"][:80]}
    finally:
        connect.call("DELETE", "/connectors/unreadable")


def hung(pod: RestartPod, block_s: float) -> tuple[float, str]:
    """Seconds from the creation of a connector whose taskConfigs() blocks the herder until the sidecar marks its
    worker stuck, and what the worker's GET /health said."""
    connect = pod.connect
    start = time.monotonic()
    connect.call("PUT", "/connectors/blocker/config", {
        "connector.class": SOURCE_CONNECTOR, "tasks.max": "1", "scripted.block": "task-configs",
        "scripted.block.ms": str(int(block_s * 1000))})
    try:
        status = connect.wait_for_status("blocker", lambda s: s["connector"]["state"] == "RUNNING", "running",
                                         timeout=60.0)
        worker = status["connector"]["worker_id"]
        sidecar = pod.sidecars[1 - pod.sidecars.index(pod.of(worker)[0])]  # the other worker's sidecar sees it too

        def marked() -> dict[str, Any] | None:
            workers = {w["id"]: w for w in sidecar.call("GET", "/fleet")["workers"] or []}
            found = workers.get(worker)
            return found if found is not None and found["stuck_since"] is not None else None

        wait_until(lambda: marked() is not None, block_s, "the worker marked stuck", interval=ASK_INTERVAL_S)
        took = time.monotonic() - start
        wait_until(lambda: (marked() or {}).get("health") == "unhealthy", 30.0, "its 500", interval=0.5)
        return took, str((marked() or {}).get("health_message"))
    finally:
        # The connector is deleted once the herders answer again (until the block ends a request waits on them).
        def answering() -> bool:
            try:
                return all(w.request("GET", "/health").status == 200 for w in connect.workers)
            except OSError:  # no answer within the request's 30 s
                return False

        wait_until(answering, max(0.0, start + block_s - time.monotonic()) + 60.0,
                   "the workers' herders answering again", interval=1.0)
        connect.call("DELETE", "/connectors/blocker")


# Each part prints its table and returns the table's rows by column name (``--json``).
Report = Callable[[RestartPod, KafkaCluster, Any, dict[str, str], random.Random], list[dict[str, Any]]]


def report_transient(pod: RestartPod, kafka: KafkaCluster, args: Any, sidecar: dict[str, str],
                     rng: random.Random) -> list[dict[str, Any]]:
    print(f"\n### A transient failure: seconds from FAILED to RUNNING ({args.runs} runs each)\n")
    print("| restarted by | median | min | max | each |")
    print("|---|---|---|---|---|")
    return [figures_row(label, values) for label, values in transient(pod, args.runs, args.poll_seconds, rng).items()]


def report_downstream(pod: RestartPod, kafka: KafkaCluster, args: Any, sidecar: dict[str, str],
                      rng: random.Random) -> list[dict[str, Any]]:
    figures, notes = downstream_away(pod, kafka, args.downstream_runs, args.away_seconds, args.stock_watch_seconds,
                                     args.strimzi_phases, rng)
    print(f"\n### A sink whose downstream is away for {args.away_seconds:.0f} s: seconds from FAILED to "
          f"RUNNING\n")
    print("| restarted by | median | min | max | each (up to 10) |")
    print("|---|---|---|---|---|")
    rows = [figures_row(label, values) for label, values in figures.items()]
    print("| the stock worker (nothing restarts it) | never | | | stays FAILED |")
    rows.append({"restarted by": "the stock worker (nothing restarts it)", "median": None, "min": None, "max": None,
                 "each": []})
    print()
    for note in notes:
        print(f"- {note}")
    return rows


def report_user(pod: RestartPod, kafka: KafkaCluster, args: Any, sidecar: dict[str, str],
                rng: random.Random) -> list[dict[str, Any]]:
    print("\n### A user failure (a converter that cannot read its record)\n")
    print("| restart requests received | watched | class | not restarted because | cause |")
    print("|---|---|---|---|---|")
    row = user_fault(pod, kafka, args.user_watch_seconds)
    print(f"| {row['restart requests received']} | {row['watched (s)']:.0f} s | {row['class']} ({row['family']}) | "
          f"{row['not restarted because']} | {row['cause']} |")
    return [row]


def report_hung(pod: RestartPod, kafka: KafkaCluster, args: Any, sidecar: dict[str, str],
                rng: random.Random) -> list[dict[str, Any]]:
    took, said = hung(pod, args.block_seconds)
    stuck_after = sidecar.get("sidecar.workers.stuck.after.ms", "30000")
    print(f"\n### A hung worker (taskConfigs() blocks its herder; sidecar.workers.stuck.after.ms={stuck_after})"
          "\n")
    print("| flagged by | seconds after the connector was created | its GET /health said |")
    print("|---|---|---|")
    print(f"| the sidecar (worker stuck) | {took:.1f} | {said[:120]} |")
    print("| Connect's REST API | never (the worker is in its group; its tasks read RUNNING) | |")
    return [{"flagged by": "the sidecar (worker stuck)", "seconds after the connector was created": took,
             "its GET /health said": said},
            {"flagged by": "Connect's REST API", "seconds after the connector was created": None,
             "its GET /health said": None}]


def report_storm(pod: RestartPod, kafka: KafkaCluster, args: Any, sidecar: dict[str, str],
                 rng: random.Random) -> list[dict[str, Any]]:
    rate = sidecar.get("sidecar.restart.max.per.second", "5")
    print(f"\n### {args.storm_tasks} tasks failing at once (sidecar.restart.max.per.second {rate} per sidecar)\n")
    print("| restarted by | requests | tasks restarted | first after the failure | spread | most in a second "
          "(each sender) | all RUNNING after |")
    print("|---|---|---|---|---|---|---|")
    rows = storm(pod, args.storm_tasks, args.poll_seconds, rng)
    for row in rows:
        print(f"| {row['restarted by']} | {row['requests']} | {row['tasks restarted']} of {row['tasks']} | "
              f"{row['first after the failure (s)']:.1f} s | {row['spread (s)']:.1f} s | "
              f"{', '.join(str(most) for most in row['most in a second (each sender)'])} | "
              f"{row['all RUNNING after (s)']:.1f} s |")
    return rows


def report_killed(pod: RestartPod, kafka: KafkaCluster, args: Any, sidecar: dict[str, str],
                  rng: random.Random) -> list[dict[str, Any]]:
    flagged, moved = killed(pod, args.rebalance_delay_ms)
    print(f"\n### A killed worker (scheduled.rebalance.max.delay.ms={args.rebalance_delay_ms})\n")
    print("| flagged by | seconds after SIGKILL |")
    print("|---|---|")
    print(f"| the sidecar (worker gone) | {flagged:.1f} |")
    print(f"| Connect's REST API (no longer RUNNING on it) | {moved:.1f} |")
    return [{"flagged by": "the sidecar (worker gone)", "seconds after SIGKILL": flagged},
            {"flagged by": "Connect's REST API (no longer RUNNING on it)", "seconds after SIGKILL": moved}]


REPORTS: dict[str, Report] = {"transient": report_transient, "downstream": report_downstream, "user": report_user,
                              "hung": report_hung, "storm": report_storm, "killed": report_killed}


def main() -> None:
    parser = BenchParser(__doc__)
    parser.add_size("--runs", full=3, quick=1, type=int, help="transient failures timed per side")
    parser.add_size("--poll-seconds", full=60.0, quick=6.0, type=float, help="the baseline poller's interval")
    parser.add_size("--storm-tasks", full=100, quick=20, type=int, help="tasks failing at once")
    parser.add_size("--rebalance-delay-ms", full=300000, quick=8000, type=int,
                    help="Connect's scheduled.rebalance.max.delay.ms")
    parser.add_size("--initial-backoff-ms", full=10000, quick=2000, type=int,
                    help="sidecar.restart.initial.backoff.ms")
    parser.add_key_values("--sidecar", help="another setting of the sidecars")
    parser.add_argument("--seed", type=int, default=1, help="the poller's phases")
    parser.add_size("--away-seconds", full=20.0, quick=6.0, type=float, help="how long the downstream is away")
    parser.add_size("--downstream-runs", full=3, quick=1, type=int, help="downstream faults timed")
    parser.add_size("--stock-watch-seconds", full=60.0, quick=10.0, type=float,
                    help="how long the stock worker's sink is watched (still FAILED) after its downstream is back")
    parser.add_size("--strimzi-phases", full=50, quick=5, type=int, help="Strimzi reconcile phases per run")
    parser.add_size("--user-watch-seconds", full=60.0, quick=5.0, type=float,
                    help="how long a user failure is watched for restarts")
    parser.add_size("--block-seconds", full=90.0, quick=20.0, type=float, help="how long taskConfigs() blocks")
    parser.add_size("--stuck-after-ms", full=30000, quick=5000, type=int, help="sidecar.workers.stuck.after.ms")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"what to measure, of {','.join(PARTS)}")
    args = parser.parse()
    rng = random.Random(args.seed)
    parts = set(args.parts.split(","))
    sidecar = {"sidecar.restart.enable": "true", "sidecar.restart.initial.backoff.ms": str(args.initial_backoff_ms),
               "sidecar.restart.exclude.connector.pattern": f"{POLLED}.*|{STOCK}.*",
               "sidecar.workers.check.interval.ms": "1000", "sidecar.workers.stuck.after.ms": str(args.stuck_after_ms),
               **args.sidecar}
    print(f"load before: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="bench-autorestart-") as scratch, \
            KafkaCluster(kafka_line("kafka-4"), Path(scratch) / "kafka", full_jit=not args.quick) as kafka, \
            RestartPod(kafka, Path(scratch), "bench-restart", sidecar,
                       worker_settings={"scheduled.rebalance.max.delay.ms": str(args.rebalance_delay_ms)},
                       full_jit=not args.quick) as pod:
        found: dict[str, Any] = {"load average at the start": os.getloadavg(), "sidecar settings": sidecar}
        for part in PARTS:
            if part in parts:
                found[part] = REPORTS[part](pod, kafka, args, sidecar, rng)
    print(f"\nload after: {load_average()}")
    write_json(args.json, {**found, "load average at the end": os.getloadavg()})


if __name__ == "__main__":
    main()
