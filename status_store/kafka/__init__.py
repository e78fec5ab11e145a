"""Kafka clients, one module per role (as aiokafka splits them):

- ``settings``: the fixed settings of every client status-store runs, and finding a topic's partitions;
- ``producer``: ``TopicProducer``, writes and their delivery reports, handed to the event loop;
- ``reader``: ``TopicReader``, a group-less reader of a whole topic with read-to-end barriers, and
  ``status_records``, its records as the status cache takes them;
- ``topics``: creating a topic and checking it is safe to use.
"""

from .producer import TopicProducer
from .reader import TopicReader, status_records
from .topics import ensure_topic, topic_exists

__all__ = ["TopicProducer", "TopicReader", "ensure_topic", "status_records", "topic_exists"]
