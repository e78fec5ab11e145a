"""The read side beyond Connect's own routes: status changes as they are read (``events``, for ``GET /events``; one
such event and its id: ``event``), the fleet's Prometheus series read from the cache (``series``), Connect's config
topic read only (``config_topic``), and text from the topic cut to one bound for every view (``text``).

May import: ``status_store.config``, ``status_store.kafka``, ``status_store.connect``, ``status_store.errors``,
``status_store.logs``. Never the store's write path, the spool or the HTTP API.
"""
