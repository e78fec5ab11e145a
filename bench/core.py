"""Benchmark the core store against raw confluent-kafka clients, in the same run.

    .venv/bin/python -m bench.core [--records 200000] [--rounds 3] [--quick]

(a) read-to-end: StatusStore.start() (topic check, read every record to the end, apply Connect's
    read rules to the cache) vs a raw Consumer reading the same records to the end.
(b) write path: StatusStore.put() of N statuses (also with the durable spool on, and with the history
    topic on: two events per write, whose own writes may still be under way when the status writes
    are acknowledged), then flush() until all are acknowledged, vs a raw
    Producer.produce() loop of the same pre-encoded records (same producer settings) until flushed;
    confluent_kafka.aio.AIOProducer is measured too, as the alternative the store does not use.
(c) write until visible: StatusStore.put() of N statuses, then read_your_writes() until every write is
    acknowledged and read back (Connect's visibility rule), vs the fair physical limit: a raw Producer
    writing the same records while a raw Consumer (same settings, same partitions) reads all N back.
    Beside them, a lean sketch of the least Python a write until visible takes on the threads the store
    uses: encode each status, produce it with a delivery callback, settle each report on the event loop,
    read every record back on a thread and decode it into a dict on the loop; no retry state, no Connect
    rules, no cache entries. How far the store is from it is what its own bookkeeping costs.
    For the store and the sketch, the event loop's own CPU time per write (its thread's, the reader's and the
    delivery reports' threads left out) is printed too, with the most a write may take of it if the store is to
    keep 0.5 of the pipeline's pace: the CPU of one thread cannot exceed the wall time.
The garbage collector is tuned as the sidecar tunes it (``service.tune_collector``).
Both run on librdkafka's mock cluster in this process (20 partitions, so that its ~5 MiB per
partition retention drops nothing). Prints a Markdown table: medians of the rounds and ratios.
"""

from __future__ import annotations

import asyncio
import collections
import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.aio import AIOProducer

from bench import BenchParser
from harness.faulty_cluster import FaultyCluster
from status_store.config import build_config
from status_store.connect.codec import StatusValue, decode_status, encode_status
from status_store.connect.model import UNVERSIONED, PluginVersion, State, TaskId, TaskStatus, task_key
from status_store.kafka.reader import CONSUME_BATCH
from status_store.kafka.settings import consumer_settings, producer_settings
from status_store.service import tune_collector
from status_store.store import StatusStore

PARTITIONS = 20
# History events are never dropped in this benchmark: the bound is set above what a run submits.
MAX_RECORDS = 10_000_000


def statuses(n: int, version: PluginVersion = UNVERSIONED) -> list[TaskStatus]:
    """Tasks of 2,000 connectors on 10 workers; every 50th FAILED with its own stack trace. ``version``: KIP-891's
    field (None: ``"version":null``, as Connect 4.x writes a status without a plugin version; UNVERSIONED: no field,
    Connect 3.x's bytes). bench/jvm's harness makes the same statuses in Java."""
    return [
        TaskStatus(TaskId(f"connector-{i % 2000}", i // 2000), State.FAILED if i % 50 == 0 else State.RUNNING,
                   f"worker-{i % 10}.example.com:8083", i % 50,
                   f"org.apache.kafka.connect.errors.ConnectException: failure {i}\n\tat X.y(X.java:1)\n"
                   if i % 50 == 0 else None, version)
        for i in range(n)
    ]


def make_store(bootstrap: str, topic: str, spool: str | None = None, history: str | None = None) -> StatusStore:
    settings = {"bootstrap.servers": bootstrap, "status.storage.topic": topic, "sidecar.startup.timeout.ms": "600000"}
    if spool is not None:
        settings["status.storage.spool.path"] = spool
    if history is not None:
        settings["status.storage.history.topic"] = history
        settings["status.storage.history.max.pending"] = str(2 * MAX_RECORDS)  # two events per write
    return StatusStore(build_config(settings), bootstrap)


async def store_write(bootstrap: str, topic: str, items: list[TaskStatus], spool: str | None = None,
                      history: str | None = None, visible: bool = False,
                      loop_cpu: list[float] | None = None, process_cpu: list[float] | None = None) -> float:
    """Seconds for the store to write every item until acknowledged (``visible``: and read back into its cache);
    ``loop_cpu`` gets the event loop thread's CPU seconds for it, ``process_cpu`` the whole process's (every
    thread: the loop, the producer's and the reader's, librdkafka's)."""
    store = make_store(bootstrap, topic, spool, history)
    await store.start()
    cpu, all_cpu = time.thread_time(), time.process_time()
    start = time.perf_counter()
    for status in items:
        store.put(status)
    await (store.read_your_writes() if visible else store.flush())
    elapsed = time.perf_counter() - start
    if loop_cpu is not None:
        loop_cpu.append(time.thread_time() - cpu)
    if process_cpu is not None:
        process_cpu.append(time.process_time() - all_cpu)
    assert store.queue.unsettled == 0
    if visible:
        assert store.cache.stats.applied == len(items), (store.cache.stats.applied, len(items))
    await store.stop()
    return elapsed


async def raw_write(bootstrap: str, topic: str, items: list[TaskStatus]) -> float:
    """Seconds for a raw Producer to write the items' records until every one is acknowledged."""
    records = [(task_key(s.id).encode(), encode_status(s.state, s.worker_id, s.generation, s.trace, s.version))
               for s in items]
    producer = Producer(producer_settings(bootstrap, {}))
    delivered = 0

    def on_delivery(error: KafkaError | None, _message: object) -> None:
        nonlocal delivered
        delivered += error is None

    start = time.perf_counter()
    produce_all(producer, topic, records, on_delivery)
    producer.flush(600)
    elapsed = time.perf_counter() - start
    assert delivered == len(records), (delivered, len(records))
    return elapsed


def produce_all(producer: Producer, topic: str, records: Iterable[tuple[bytes, bytes | None]],
                on_delivery: Callable[[KafkaError | None, object], None] | None = None) -> int:
    """Hand every (key, value) record to the producer, waiting for room in its queue when it is full; how many."""
    count = 0
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        count += 1
    return count


async def raw_pipeline(bootstrap: str, topic: str, items: list[TaskStatus], partitions: int = PARTITIONS) -> float:
    """A raw Producer writes the records while a raw Consumer, on a thread of its own as the store's reader is,
    reads all of them back (the topic's ``partitions``): the time until the last one is read."""
    records = [(task_key(s.id).encode(), encode_status(s.state, s.worker_id, s.generation, s.trace, s.version))
               for s in items]
    producer = Producer(producer_settings(bootstrap, {}))
    consumer = Consumer(consumer_settings(bootstrap, {}))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    read = 0

    def read_back() -> None:
        nonlocal read
        deadline = time.monotonic() + 600
        while read < len(records) and time.monotonic() < deadline:
            for message in consumer.consume(CONSUME_BATCH, 0.1):
                read += message.error() is None

    start = time.perf_counter()
    reader = threading.Thread(target=read_back)
    reader.start()
    produce_all(producer, topic, records)
    producer.flush(600)
    await asyncio.to_thread(reader.join)
    elapsed = time.perf_counter() - start
    consumer.close()
    assert read == len(records), (read, len(records))
    return elapsed


async def lean_sketch(bootstrap: str, topic: str, items: list[TaskStatus], loop_cpu: list[float]) -> float:
    """The lean sketch of (c): what a write until visible costs with no bookkeeping beyond a settled mark;
    ``loop_cpu`` gets the event loop thread's CPU seconds for it."""
    loop = asyncio.get_running_loop()
    producer = Producer(producer_settings(bootstrap, {}))
    consumer = Consumer(consumer_settings(bootstrap, {}))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    reports: collections.deque[tuple[int, KafkaError | None, int, int]] = collections.deque()
    settled: dict[int, tuple[int, int]] = {}
    latest: dict[bytes | None, StatusValue] = {}
    read = 0
    all_read, all_settled = loop.create_future(), loop.create_future()
    stopping = threading.Event()

    def apply(batch: list[Message]) -> None:
        nonlocal read
        for message in batch:
            latest[message.key()] = decode_status(message.value() or b"")
        read += len(batch)
        if read >= len(items) and not all_read.done():
            all_read.set_result(None)

    def settle() -> None:
        while reports:
            number, _, partition, offset = reports.popleft()
            settled[number] = (partition, offset)
        if len(settled) >= len(items) and not all_settled.done():
            all_settled.set_result(None)

    def read_back() -> None:
        while not stopping.is_set():
            batch = [message for message in consumer.consume(CONSUME_BATCH, 0.1) if message.error() is None]
            if batch:
                loop.call_soon_threadsafe(apply, batch)

    def serve_reports() -> None:
        while not stopping.is_set():
            producer.poll(0.1)
            if reports:
                loop.call_soon_threadsafe(settle)

    def report(number: int) -> Callable[[KafkaError | None, Message], None]:
        return lambda error, message: reports.append((number, error, message.partition() or 0,
                                                      message.offset() or 0))

    threads = [threading.Thread(target=read_back), threading.Thread(target=serve_reports)]
    for thread in threads:
        thread.start()
    cpu = time.thread_time()
    start = time.perf_counter()
    for number, status in enumerate(items):
        value = encode_status(status.state, status.worker_id, status.generation, status.trace)
        while True:
            try:
                producer.produce(topic, value, task_key(status.id).encode(), on_delivery=report(number))
                break
            except BufferError:
                await asyncio.sleep(0.001)
    async with asyncio.timeout(600):
        await asyncio.gather(all_read, all_settled)
    elapsed = time.perf_counter() - start
    loop_cpu.append(time.thread_time() - cpu)
    stopping.set()
    for thread in threads:
        await asyncio.to_thread(thread.join)
    consumer.close()
    assert len(settled) == len(latest) == len(items), (len(settled), len(latest), len(items))
    return elapsed


async def aio_write(bootstrap: str, topic: str, items: list[TaskStatus]) -> float:
    records = [(task_key(s.id).encode(), encode_status(s.state, s.worker_id, s.generation, s.trace)) for s in items]
    producer = AIOProducer(producer_settings(bootstrap, {}))
    start = time.perf_counter()
    futures = [await producer.produce(topic, value=value, key=key) for key, value in records]
    await producer.flush()
    await asyncio.gather(*futures)
    elapsed = time.perf_counter() - start
    await producer.close()
    return elapsed


async def aio_single_latency(bootstrap: str, topic: str) -> float:
    producer = AIOProducer(producer_settings(bootstrap, {}))
    start = time.perf_counter()
    await (await producer.produce(topic, value=b"{}", key=b"status-connector-latency"))
    elapsed = time.perf_counter() - start
    await producer.close()
    return elapsed


async def store_single_latency(bootstrap: str, topic: str) -> float:
    store = make_store(bootstrap, topic)
    await store.start()
    start = time.perf_counter()
    assert (await store.put(TaskStatus(TaskId("latency", 0), State.RUNNING, "w:1", 0)).result()).ok
    elapsed = time.perf_counter() - start
    await store.stop()
    return elapsed


async def store_read(bootstrap: str, topic: str, expected: int, process_cpu: list[float] | None = None) -> float:
    """Seconds for a new store to start on a topic of ``expected`` statuses: made (its clients set up), the topic
    checked, every record read to the end into the cache; ``process_cpu`` gets the process's CPU seconds for it."""
    cpu = time.process_time()
    start = time.perf_counter()
    store = make_store(bootstrap, topic)
    await store.start()
    elapsed = time.perf_counter() - start
    if process_cpu is not None:
        process_cpu.append(time.process_time() - cpu)
    assert store.cache.stats.applied == expected, (store.cache.stats.applied, expected)
    await store.stop()
    return elapsed


async def raw_read(bootstrap: str, topic: str, expected: int, partitions: int = PARTITIONS) -> float:
    """Seconds for a raw Consumer to read the topic's ``expected`` records from its ``partitions`` to their ends."""
    consumer = Consumer(consumer_settings(bootstrap, {}))
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    count, at_end = 0, set[int | None]()
    deadline = time.monotonic() + 600
    while len(at_end) < partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: not read to its end within 600 s")
        for message in consumer.consume(CONSUME_BATCH, 0.1):
            error = message.error()
            if error is None:
                count += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
    elapsed = time.perf_counter() - start
    consumer.close()
    assert count == expected, (count, expected)
    return elapsed


async def median_of(rounds: int, run: Callable[[], Awaitable[float]]) -> float:
    return statistics.median([await run() for _ in range(rounds)])


async def main() -> None:
    """Run both paths and print the table."""
    parser = BenchParser(__doc__)
    parser.add_size("--records", type=int, full=200_000, quick=2000, help="task statuses written and read")
    parser.add_size("--rounds", type=int, full=3, quick=1, help="rounds, for the medians")
    args = parser.parse()
    n: int = args.records
    rounds: int = args.rounds
    cluster = FaultyCluster(brokers=1)
    items = statuses(n)
    tune_collector()  # as the sidecar does once its store has started

    def fresh_topic() -> str:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, PARTITIONS, 1)
        return topic

    bootstrap = cluster.bootstrap_servers
    # Read path first, on a cluster holding nothing else: one topic of n records, read by both, interleaved.
    topic = fresh_topic()
    await raw_write(bootstrap, topic, items)
    read: dict[str, list[float]] = {"store": [], "raw": []}
    for _ in range(rounds):
        read["raw"].append(await raw_read(bootstrap, topic, n))
        read["store"].append(await store_read(bootstrap, topic, n))
    # Write path: each round on a fresh topic, the three clients interleaved.
    write: dict[str, list[float]] = {"store": [], "store with spool": [], "store with history": [], "raw": [],
                                     "aio": []}
    with tempfile.TemporaryDirectory() as spool_dir:
        for round_ in range(rounds):
            write["raw"].append(await raw_write(bootstrap, fresh_topic(), items))
            write["store"].append(await store_write(bootstrap, fresh_topic(), items))
            spool = os.path.join(spool_dir, f"spool-{round_}.db")
            write["store with spool"].append(await store_write(bootstrap, fresh_topic(), items, spool))
            write["store with history"].append(await store_write(bootstrap, fresh_topic(), items,
                                                                 history=fresh_topic()))
            write["aio"].append(await aio_write(bootstrap, fresh_topic(), items))
    # Write until visible: each round on a fresh topic, the raw pipeline and the store interleaved.
    visible: dict[str, list[float]] = {"raw pipeline": [], "lean sketch": [], "store": []}
    loop_cpu: dict[str, list[float]] = {"lean sketch": [], "store": []}
    for _ in range(rounds):
        visible["raw pipeline"].append(await raw_pipeline(bootstrap, fresh_topic(), items))
        visible["lean sketch"].append(await lean_sketch(bootstrap, fresh_topic(), items, loop_cpu["lean sketch"]))
        visible["store"].append(await store_write(bootstrap, fresh_topic(), items, visible=True,
                                                  loop_cpu=loop_cpu["store"]))
    latency_store = await median_of(rounds, lambda: store_single_latency(bootstrap, fresh_topic()))
    latency_aio = await median_of(rounds, lambda: aio_single_latency(bootstrap, fresh_topic()))
    cluster.close()

    def rate(seconds: list[float]) -> float:
        return n / statistics.median(seconds)

    print(f"records: {n}, rounds: {rounds} (medians), mock cluster, {PARTITIONS} partitions\n")
    print("| path | client | records/s | ratio to raw |")
    print("|---|---|---:|---:|")
    for name in ("raw", "store"):
        print(f"| read-to-end | {name} | {rate(read[name]):,.0f} | {rate(read[name]) / rate(read['raw']):.2f} |")
    for name in ("raw", "store", "store with spool", "store with history", "aio"):
        print(f"| write until acknowledged | {name} | {rate(write[name]):,.0f} | "
              f"{rate(write[name]) / rate(write['raw']):.2f} |")
    for name in ("raw pipeline", "lean sketch", "store"):
        print(f"| write until visible | {name} | {rate(visible[name]):,.0f} | "
              f"{rate(visible[name]) / rate(write['raw']):.2f} |")
    print(f"\nwrite until visible: the store at {rate(visible['store']) / rate(visible['raw pipeline']):.2f} of the "
          f"raw produce + read-back pipeline, {rate(visible['store']) / rate(write['raw']):.2f} of the raw produce "
          f"loop; the lean sketch at {rate(visible['lean sketch']) / rate(visible['raw pipeline']):.2f} of the "
          f"pipeline (the store at {rate(visible['store']) / rate(visible['lean sketch']):.2f} of the sketch)")
    def per_write_us(seconds: list[float]) -> float:
        return statistics.median(seconds) / n * 1e6

    # At 0.5 of the pipeline's pace a write may take at most twice the pipeline's wall time per record of the loop.
    budget = 2 * per_write_us(visible["raw pipeline"])
    print(f"event loop CPU per write until visible: store {per_write_us(loop_cpu['store']):.1f} µs, lean sketch "
          f"{per_write_us(loop_cpu['lean sketch']):.1f} µs; at 0.5 of the pipeline's pace the loop has at most "
          f"{budget:.1f} µs per write")
    spool_cost = rate(write["store with spool"]) / rate(write["store"])
    print(f"\nthe spool's cost: the store writes at {spool_cost:.2f} of its rate without a spool")
    history_cost = rate(write["store with history"]) / rate(write["store"])
    print(f"the history topic's cost: the store writes at {history_cost:.2f} of its rate without history")
    print(f"\nsingle write, submit to acknowledged: store {latency_store * 1000:.1f} ms, "
          f"AIOProducer {latency_aio * 1000:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
