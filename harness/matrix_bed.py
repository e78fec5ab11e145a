"""The fault matrix's test bed: on one Apache Kafka broker (a listener of its own for the sidecars, behind a
``KafkaProxy``), two sides of one Connect line, each of ``WORKERS`` workers with a group and topics of its own:

- **the pod**: stock workers each started with the agent and a sidecar of its own (``worker_pods.WorkerPods``);
- **stock**: stock workers on their own status store.

Every fault the matrix makes is a method here, each the real one: a process stopped (SIGSTOP), killed (SIGKILL) or
stopped for good (SIGTERM), the broker stopped, the sidecars' listener black-holed or refused, the agents' HTTP
answered wrongly. ``heal`` undoes every fault; ``ready`` waits until the pod's agents hand their statuses to their
sidecars again (restarting the pod's workers when they do not within a bound: an agent wedged by an earlier row).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .http_proxy import AnswerFault, Refusal
from .java_process import KafkaLine, wait_until
from .kafka_proxy import Fault as KafkaFault
from .matrix_views import Ask, Found, rest_found
from .real_connect import ConnectCluster, ConnectWorker
from .real_kafka import KafkaCluster, Started
from .sidecar import LiveSidecar
from .topic_tail import TopicTail
from .worker_pods import SIDECARS, WorkerPod, WorkerPods

WORKERS = 2
BROKER = 1
POD, STOCK = "pod", "stock"
# The note of a row whose pod's workers had to be restarted before it (``Bed.ready``).
RESTARTED_FIRST = "the pod's workers restarted first"
# Answers an agent cannot believe (agent/PROTOCOL.md, rules 1 and 4): it gives that sidecar instance no statuses again
# until it restarts as a new one, so healing such a fault restarts the sidecars, as an operator would.
# The sample of a sidecar's /metrics that counts the late writes it undid (kafka/late_writes.py).
UNDONE_SAMPLE = 'status_late_writes_total{outcome="undone"}'
DISTRUSTED = frozenset({AnswerFault.WRONG_SHAPE, AnswerFault.DEEP_JSON, AnswerFault.WRITTEN_UNTRULY})


class Side:
    """One side of the bed: its Connect workers, its status topic's tail, and (the pod) its sidecars."""

    def __init__(self, name: str, connect: ConnectCluster, sidecars: Iterable[LiveSidecar] = ()) -> None:
        self.name, self.connect, self.sidecars = name, connect, list(sidecars)
        self.tail: TopicTail | None = None

    def start_tail(self) -> None:
        self.tail = TopicTail(self.connect.kafka.bootstrap_servers, self.connect.status_topic, keep_records=True)

    def running_apis(self) -> list[Ask]:
        """The REST API of each running worker."""
        return [worker.request for worker in self.connect.running()]

    def views(self, keys: Iterable[str], connectors: Iterable[str]) -> dict[str, Found]:
        """Each view's states of these keys: the topic, every running worker's REST API, every sidecar's, each asked on
        a thread of its own, so that a look takes as long as its slowest view, not as long as all of them."""
        tail = self.tail
        assert tail is not None
        names, wanted = list(connectors), list(keys)
        looks: dict[str, Callable[[], Found]] = {"topic": lambda: tail.found(wanted)}
        for index, worker in enumerate(self.connect.workers):
            if worker.process.alive():
                looks[f"worker {index}"] = functools.partial(rest_found, worker.request, names)
        for index, sidecar in enumerate(self.sidecars):
            looks[f"sidecar {index}"] = (functools.partial(rest_found, sidecar.request, names) if sidecar.service
                                         else lambda: None)
        with ThreadPoolExecutor(len(looks)) as pool:
            asked = {view: pool.submit(look) for view, look in looks.items()}
            return {view: future.result() for view, future in asked.items()}

    def late_writes_undone(self) -> list[float]:
        """Each sidecar's count of writes it gave up that landed late over a newer record of their key and were
        undone (``status_late_writes_total{outcome="undone"}``); 0 for a sidecar not running or not answering."""
        counts = []
        for sidecar in self.sidecars:
            count = 0.0
            if sidecar.service:
                try:
                    text = sidecar.request("GET", "/metrics", accept="text/plain").body.decode()
                except OSError:
                    text = ""
                for line in text.splitlines():
                    if line.startswith(UNDONE_SAMPLE):
                        count = float(line.rsplit(" ", 1)[1])
            counts.append(count)
        return counts

    def stop_tail(self) -> None:
        if self.tail is not None:
            self.tail.stop()
            self.tail = None


def together(actions: Iterable[Callable[[], None]]) -> None:
    """Run actions at the same moment, each on a thread of its own; return once all are done."""
    todo = list(actions)
    with ThreadPoolExecutor(max(1, len(todo))) as pool:
        for future in [pool.submit(action) for action in todo]:
            future.result()


class Bed(Started):
    """Both sides of one Connect line on ``kafka`` (which has the ``SIDECARS`` listener)."""

    def __init__(self, line: KafkaLine, workdir: Path, kafka: KafkaCluster, agent_options: Mapping[str, str],
                 sidecar_settings: Mapping[str, str], full_jit: bool = False) -> None:
        self.line, self.kafka = line, kafka
        prefix = f"matrix-{line.name}"
        self.pods = WorkerPods(line, workdir / "pod", kafka, f"{prefix}-pod", WORKERS, agent_options,
                               sidecar_settings, full_jit)
        self.stock = ConnectCluster(line, workdir / "stock", kafka, f"{prefix}-stock", WORKERS, full_jit=full_jit)
        self.sides = {POD: Side(POD, self.pods.connect, self.pods.sidecars), STOCK: Side(STOCK, self.stock)}
        # Whether the agents met an answer they distrust their sidecar's instance for (DISTRUSTED) since the last heal.
        self.distrusted = False

    def start(self) -> None:
        together([self.pods.start, self.stock.start])
        for side in self.sides.values():
            side.start_tail()

    def close(self) -> None:
        for side in self.sides.values():
            side.stop_tail()
        self.resume_sidecars()  # a stopped sidecar holds up its agent's last request
        # Every worker at once (each may take its stop bound): then the sides close what is left.
        together(worker.stop for side in self.sides.values() for worker in side.connect.workers)
        together([self.pods.close, self.stock.close])

    # ----------------------------------------------------------------------------- Kafka

    def stop_broker(self) -> None:
        """Kafka away for everyone: the broker stopped (SIGTERM, its clean shutdown)."""
        self.kafka.stop_broker(BROKER)

    def start_broker(self) -> None:
        """The broker started again; return once it is registered."""
        self.kafka.start_broker(BROKER)

    def cut_sidecars(self, fault: KafkaFault) -> None:
        """Kafka cut off from the sidecars alone: their listener's proxies hold every byte (``BLACKHOLE``) or close
        every connection and refuse new ones (``REFUSE``)."""
        for proxy in self.kafka.listener_proxies(SIDECARS):
            proxy.set_fault(fault)
            if fault is KafkaFault.REFUSE:
                proxy.cut()

    # ----------------------------------------------------------------------------- sidecars and their answers

    def each_pod(self, index: int | None) -> list[WorkerPod]:
        """Pod ``index``, or every pod (None)."""
        return self.pods.pods if index is None else [self.pods.pods[index]]

    def kill_sidecars(self, index: int | None = None) -> None:
        """SIGKILL each sidecar; its proxy stops listening with it, so that the agent's connections are refused as a
        killed sidecar's are (``HttpFaultProxy.listen``)."""
        together(pod.kill_sidecar for pod in self.each_pod(index))

    def start_sidecars(self, index: int | None = None) -> None:
        together(pod.start_sidecar for pod in self.each_pod(index) if pod.sidecar.service is None)

    def pause_sidecars(self, index: int | None = None) -> None:
        for pod in self.each_pod(index):
            pod.pause_sidecar()

    def resume_sidecars(self, index: int | None = None) -> None:
        for pod in self.each_pod(index):
            if pod.sidecar.service is not None and pod.sidecar.service.process.poll() is None:
                pod.resume_sidecar()

    def misanswer(self, fault: AnswerFault) -> None:
        """Every agent's writes answered wrongly (``http_proxy.AnswerFault``)."""
        for proxy in self.pods.proxies:
            proxy.answer_fault = fault
        self.distrusted |= fault in DISTRUSTED

    def restart_sidecars(self) -> None:
        """Every sidecar stopped (SIGTERM, its clean shutdown) and started again: a new instance each."""
        together(pod.stop_sidecar for pod in self.pods.pods)
        together(pod.start_sidecar for pod in self.pods.pods)

    def refuse(self, refusal: Refusal) -> None:
        for proxy in self.pods.proxies:
            proxy.refusal = refusal

    # ----------------------------------------------------------------------------- workers, on both sides at once

    def workers(self, index: int) -> list[ConnectWorker]:
        """Worker ``index`` of each side."""
        return [side.connect.workers[index] for side in self.sides.values()]

    def kill_workers(self, index: int) -> None:
        """SIGKILL worker ``index`` of each side (a crash: the pod's sidecar stays)."""
        together(worker.kill for worker in self.workers(index))

    def stop_workers(self, index: int) -> None:
        """Worker ``index`` of each side stopped (SIGTERM, Connect's clean shutdown; SIGKILL past its bound)."""
        together(worker.stop for worker in self.workers(index))

    # ----------------------------------------------------------------------------- between rows

    def heal(self) -> None:
        """Every fault undone: the broker, the sidecars' listener, the sidecars and their proxies (sidecars the agents
        no longer believe restarted), the workers."""
        if not any(node.process is not None and node.process.alive() for node in self.kafka.brokers):
            self.start_broker()
        self.cut_sidecars(KafkaFault.NONE)
        self.misanswer(AnswerFault.NONE)
        self.refuse(Refusal.NONE)
        self.resume_sidecars()
        self.start_sidecars()
        if self.distrusted:
            self.restart_sidecars()
            self.distrusted = False
        down = [worker for side in self.sides.values() for worker in side.connect.workers
                if not worker.process.alive()]
        together(worker.start for worker in down)

    def ready(self, bound_s: float) -> list[str]:
        """Wait until every pod's agent hands its statuses to its sidecar with nothing queued; past ``bound_s``,
        restart the pod's workers (a fresh agent each) and wait again. What was done, for the row's notes."""
        def on_sidecars() -> bool:
            return all(pod.on_sidecar(self.line) for pod in self.pods.pods)

        try:
            wait_until(on_sidecars, bound_s, "every pod's agent on its sidecar", interval=1.0)
            return []
        except TimeoutError:
            figures = "; ".join(
                f"worker {index}: on its sidecar {f.get('on-sidecar-path', '?')}, {f.get('queued-keys', '?')} keys "
                f"queued" for index, f in enumerate(pod.agent_figures(self.line) for pod in self.pods.pods))
        together(worker.stop for worker in self.pods.connect.workers)
        together(worker.start for worker in self.pods.connect.workers)
        wait_until(on_sidecars, bound_s, "every pod's agent on its sidecar after a restart", interval=1.0)
        return [f"{RESTARTED_FIRST}: their agents were not all on their sidecars with nothing queued within "
                f"{bound_s:g} s ({figures})"]
