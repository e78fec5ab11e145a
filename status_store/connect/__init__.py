"""Connect's rules and bytes (pure: no Kafka client, no event loop, no HTTP, no storage).

Owns what a Connect worker would say is right: the status values and keys (``model``), their bytes as
Jackson writes and reads them (``codec``, ``jackson``, with ``java_text`` for the encodings and Java's strings), the
largest record the topic takes (``record_limit``), connector and task configurations as the config topic holds them
(``configs``), the status topic materialized with Connect's read rules (``cache``), and why a FAILED status failed,
from the Java trace Connect writes in it (``failures``). Everything else in the package builds on it.

May import: ``status_store.errors`` and the standard library. Nothing else of the package.
"""
