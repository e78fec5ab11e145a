"""Values other writers leave in the status topic, read by the store as a Connect worker reads them (each test
runs on the mock cluster and Tansu unless it says otherwise)."""

from __future__ import annotations

import asyncio
import uuid

from confluent_kafka import Producer

from harness.tansu import TansuBroker
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus, TopicStatus
from status_store.store import StatusStore

from .conftest import StoreFactory
from .helpers import last_values, write_raw

WAIT = 15.0


async def test_a_status_without_worker_id_is_read_and_not_overwritten_by_put_safe(store: StatusStore) -> None:
    write_raw(store, (b"status-connector-c", b'{"state":"RUNNING","generation":2}'),
              (b"status-task-c-0", b'{"state":"RUNNING","trace":null,"worker_id":null,"generation":2}'))
    await store.read_to_end(WAIT)
    assert store.cache.get_connector("c") == ConnectorStatus("c", State.RUNNING, None, 2)
    assert store.cache.get_task(TaskId("c", 0)) == TaskStatus(TaskId("c", 0), State.RUNNING, None, 2)
    # Connect's put_safe compares the cached worker id with equals(): on null it throws and writes nothing.
    assert store.put_safe(ConnectorStatus("c", State.FAILED, "w:8083", 3)) is None
    assert store.put_safe(TaskStatus(TaskId("c", 0), State.UNASSIGNED, "w:8083", 3)) is None
    # put writes over it.
    assert (await store.put(ConnectorStatus("c", State.FAILED, "w:8083", 3)).result(WAIT)).ok
    await store.read_your_writes(WAIT)
    assert store.cache.get_connector("c") == ConnectorStatus("c", State.FAILED, "w:8083", 3)


async def test_values_in_spellings_only_jackson_reads_are_read(store: StatusStore) -> None:
    text = '{"state":"PAUSED","trace":"\\ud800 😀","worker_id":"w","generation":007}'
    write_raw(store, (b"status-connector-bom", b"\xef\xbb\xbf" + text.encode()),
              (b"status-connector-utf16", text.encode("utf-16-le")),
              (b"status-connector-utf32", text.encode("utf-32")))
    await store.read_to_end(WAIT)
    for name in ("bom", "utf16", "utf32"):
        assert store.cache.get_connector(name) == ConnectorStatus(name, State.PAUSED, "w", 7, "\ud800 😀")
    assert store.cache.stats.garbled_values == 0


async def test_a_status_read_with_a_lone_surrogate_is_written_back_as_jackson_writes_it(store: StatusStore) -> None:
    write_raw(store, (b"status-connector-c", b'{"state":"FAILED","trace":"\\ud800","worker_id":"w","generation":1}'))
    await store.read_to_end(WAIT)
    status = store.cache.get_connector("c")
    assert status is not None
    assert (await store.put(status).result(WAIT)).ok
    assert last_values(store)[b"status-connector-c"] == (
        b'{"state":"FAILED","trace":"\\uD800","worker_id":"w","generation":1}')


def topic_value(name: str, connector: str, task: int, timestamp: int) -> bytes:
    return (f'{{"topic":{{"name":"{name}","connector":"{connector}","task":{task},'
            f'"discoverTimestamp":{timestamp}}}}}').encode()


async def test_topic_statuses_connect_lists_are_listed(store: StatusStore) -> None:
    # An empty name, a ':' in the name, a negative task, another connector in the value: Connect lists them
    # under the key's connector (and shows the value's topic name).
    write_raw(store, (b"status-topic-a:connector-c", topic_value("", "c", 0, 1)),
              (b"status-topic-b:connector-c", topic_value("b:x", "", -1, 2)),
              (b"status-topic-t:connector-c", topic_value("t", "c", 0, 3)))
    await store.read_to_end(WAIT)
    assert store.cache.get_all_topics("c") == [TopicStatus("", "c", 0, 1), TopicStatus("b:x", "", -1, 2),
                                         TopicStatus("t", "c", 0, 3)]
    assert store.cache.stats.garbled_values == 0


async def test_a_reset_tombstones_the_key_each_value_names_as_connect_does_and_empties_the_list(
        store: StatusStore) -> None:
    write_raw(store, (b"status-topic-a:connector-c", topic_value("", "c", 0, 1)),
              (b"status-topic-b:connector-c", topic_value("b:x", "", -1, 2)),
              (b"status-topic-t:connector-c", topic_value("t", "c", 0, 3)),
              (b"status-topic-u:connector-c", topic_value("u", "d", 0, 4)),
              (b"status-topic-u:connector-d", topic_value("u", "d", 0, 5)))
    await store.read_to_end(WAIT)
    updates = store.reset_topics("c")
    # Connect's reset: the key each listed value names (status-topic-<name>:connector-<connector>) ...
    connects = [b"status-topic-:connector-c", b"status-topic-b:x:connector-", b"status-topic-t:connector-c",
                b"status-topic-u:connector-d"]
    # ... and ours besides, the records' own keys where their values name others, so that nothing stays listed.
    own = [b"status-topic-a:connector-c", b"status-topic-b:connector-c", b"status-topic-u:connector-c"]
    assert sorted(update.key.encode() for update in updates) == sorted(connects + own)
    await store.read_your_writes(WAIT)
    assert store.cache.get_all_topics("c") == []
    assert store.cache.get_all_topics("d") == []  # the value of u:connector-c named it: Connect deletes it too
    written = last_values(store)
    assert all(written[key] is None for key in connects + own)


async def test_records_of_an_open_transaction_are_read_as_connect_reads_them(tansu: TansuBroker,
                                                                           store_factory: StoreFactory) -> None:
    # Connect's consumer reads uncommitted records (Kafka's default isolation level). Only Tansu keeps an open
    # transaction's records from read_committed readers; librdkafka's mock cluster does not, so it cannot
    # tell the two apart.
    topic = f"status-{uuid.uuid4().hex[:12]}"
    async with store_factory(tansu.bootstrap_servers, topic) as store:
        producer = Producer({"bootstrap.servers": tansu.bootstrap_servers, "partitioner": "murmur2_random",
                             "transactional.id": f"connect-like-{topic}"})
        await asyncio.to_thread(producer.init_transactions, WAIT)
        producer.begin_transaction()
        producer.produce(topic, b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}',
                         b"status-connector-in-txn")
        assert producer.flush(WAIT) == 0
        try:
            await store.read_to_end(WAIT)
            assert store.cache.get_connector("in-txn") == ConnectorStatus("in-txn", State.RUNNING, "w", 1)
        finally:
            await asyncio.to_thread(producer.abort_transaction, WAIT)


async def test_a_task_key_with_an_empty_connector_is_skipped_and_counted(store: StatusStore) -> None:
    # Connect caches it under the connector "", which none of its REST paths can name; we count it as garbled.
    write_raw(store, (b"status-task--0", b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}'))
    await store.read_to_end(WAIT)
    assert store.cache.stats.garbled_values == 1
    assert store.cache.get_all_tasks("") == []
