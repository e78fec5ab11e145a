"""The embedded broker for a first try with nothing to install: librdkafka's in-memory mock cluster
(``mock_cluster``: its C API through ctypes, checked against the librdkafka version it was written for) started
with the status topic (``broker``).

May import: ``status_store.config``, ``status_store.kafka``, ``status_store.errors``. Only the service starts it;
configuration never loads it.
"""
