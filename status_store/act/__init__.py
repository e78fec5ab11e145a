"""Acting on what the status topic shows: auto-restart of FAILED connectors and tasks with a backoff (``plan``, pure;
``restarter``, through each worker's REST API, the worker asked first; ``worker_rest``, the workers' REST client with
TLS and credentials), the Connect group's membership read to tell the workers that are gone (``workers``, pure;
``group``, the Kafka read) and those that hang in it (``stuck``, pure; ``health_watch``, their ``GET /health``), one
health word per connector (``health``, pure), and the record of each connector over the last hour, day and week
(``record``, pure; ``record_reader``, the history topic read into it). ``actions`` composes them for the service, the
HTTP API and the metrics (``series``); ``events`` are what the sidecar did and saw (for ``GET /events``), ``marks``
what its actions add to the fleet's views.

May import: ``status_store.store`` and everything below it (the cache, the history topic, the events of
``GET /events``, the configuration, the Kafka clients). Never the HTTP API. The pure modules (``health``, ``plan``,
``workers``, ``stuck``, ``record``) need no event loop, Kafka client or HTTP: a test drives them on a clock of its own.
"""
