"""The baselines auto-restart is measured against (``bench.autorestart``): an operator's poll of Connect's REST API
that restarts what it finds FAILED (``Poller``), and Strimzi's auto-restart rule on a failure's timeline
(``strimzi_restarts``)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

from harness.real_connect import ConnectCluster

# The connectors the poller handles (the sidecars leave them alone).
POLLED = "poll-"
# Strimzi's operator reconciles a connector this often.
STRIMZI_RECONCILE_S = 120.0


class Poller:
    """An operator's auto-restart: every ``interval_s`` it reads every connector's status and restarts each FAILED
    task of the connectors it handles (names starting ``poll-``), one request after another. Its first check comes at
    a random phase."""

    def __init__(self, connect: ConnectCluster, interval_s: float, rng: random.Random) -> None:
        self.connect, self.interval_s = connect, interval_s
        self.sent: list[float] = []
        self._stop = threading.Event()
        self._phase = rng.uniform(0, interval_s)
        self._thread = threading.Thread(target=self._run, name="poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        if self._stop.wait(self._phase):
            return
        while True:
            answer = self.connect.request("GET", "/connectors?expand=status")
            statuses = answer.json() if answer.status == 200 else {}
            for name, entry in sorted(statuses.items()):
                if not name.startswith(POLLED):
                    continue
                for task in entry["status"]["tasks"]:
                    if task["state"] == "FAILED":
                        self.sent.append(time.time())
                        self.connect.request("POST", f"/connectors/{name}/tasks/{task['id']}/restart")
            if self._stop.wait(self.interval_s):
                return


def strimzi_restarts(failed_at: float, phase: float) -> Iterator[float]:
    """Strimzi's auto-restarts of a failure at ``failed_at``: the first at its next reconcile (every
    ``STRIMZI_RECONCILE_S``, ``phase`` seconds into the interval when it failed), then ``min(n*n + n, 60)`` minutes
    after restart n (its backoff; the count reset once it has run for it: a recovered failure is not restarted
    again)."""
    at = failed_at + (STRIMZI_RECONCILE_S - phase)
    n = 1
    while True:
        yield at
        at += min(n * n + n, 60) * 60.0
        n += 1
