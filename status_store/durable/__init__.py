"""What must survive: the spool (accepted writes on local disk across crashes) and its replay at start, the
append-only event topics (status history, dead letters), and what becomes of an update after its last retry.

May import: ``status_store.config``, ``status_store.kafka``, ``status_store.retry``, ``status_store.connect``,
``status_store.errors``. Never the store, the fleet's read side or the HTTP API.
"""
