"""Kafka clients, one module per role (as aiokafka splits them):

- ``settings``: the fixed settings of every client status-store runs, and finding a topic's partitions;
- ``producer``: ``TopicProducer``, writes and their delivery reports, handed to the event loop;
- ``late_writes``: ``LateWrites``, writes given up that may still land, watched, and undone when one lands late over a
  newer record of its key;
- ``reader``: ``TopicReader``, a group-less reader of a whole topic with read-to-end barriers, and
  ``reader.status_records``, its records as the status cache takes them; ``reading``: what a consumer's errors mean,
  decided once for every reader;
- ``partition_watch``: the signal that a held partition can take writes again;
- ``groups``: a consumer group's members as its coordinator lists them (the Connect group's workers);
- ``topics``: creating a topic and checking it is safe to use;
- ``client_log``: where librdkafka's own log lines go; ``security_failures``: a refused login or certificate, named
  once per cause.

May import: ``status_store.connect``, ``status_store.retry`` (the delivery a producer reports), ``status_store.errors``.
"""
