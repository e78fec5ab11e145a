"""The retry engine: every attempt of every write, scheduled on one event loop (KIP-1278's backoff, bounded
retries, per-key coalescing, held partitions, probes and a ramped release).

``queue.RetryQueue`` is its one public face; ``updates`` holds what a caller sees (the ``StatusUpdate`` handle, its
``Outcome``, ``RetryListener``, ``RetryPolicy``). Under the queue, ``engine.Engine`` is the state machine without
I/O that decides everything; its parts are private to it. Bottom up (each imports only parts below it):
``backoff``, ``budget``, ``delivery`` -> ``updates`` -> ``scheduler`` -> ``holds`` -> ``commands`` -> ``ledger``
-> ``partition_gate`` -> ``timing`` -> ``key_slots`` -> ``key_sends`` -> ``key_writes`` -> ``engine`` -> ``queue``.
The engine keeps no clock: every event gives it its time, and it decides the records to send and when to be woken
next as commands; the queue, the one layer with a clock and the one module that imports asyncio, hands the records to
a ``Send`` callable (``delivery``), keeps one loop timer, and makes the future a handle's caller awaits. It knows
nothing of Kafka's clients, the store, the spool or the HTTP API; what happens after an update's last retry is the
store's policy (``durable.after_retry``), not the engine's.

May import: ``status_store.connect``, ``status_store.errors`` and the standard library.
"""
