"""The retry engine: every attempt of every write, scheduled on one event loop (KIP-1278's backoff, bounded
retries, per-key coalescing, held partitions, probes and a ramped release).

``queue.RetryQueue`` is its one public face; ``updates`` holds what a caller sees (the ``StatusUpdate`` handle, its
``Outcome``, ``RetryListener``, ``RetryPolicy``). Its parts, bottom up (each imports only parts below it):
``backoff``, ``budget``, ``delivery`` -> ``updates`` -> ``scheduler`` -> ``holds`` -> ``commands`` -> ``ledger``
-> ``partition_gate`` -> ``timing`` -> ``key_slots`` -> ``key_writes`` -> ``queue``. The engine's parts decide the
records to send as commands; the queue hands them to a ``Send`` callable (``delivery``). It knows nothing of Kafka's
clients, the store, the spool or the HTTP API; what happens after an update's last retry is the store's policy
(``durable.after_retry``), not the engine's.

May import: ``status_store.connect``, ``status_store.errors`` and the standard library.
"""
