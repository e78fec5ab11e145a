"""Where librdkafka's own log lines go: every client (the Python clients through their ``logger`` setting,
the mock cluster's handle through its log callback) logs through ``ClientLog`` into the
``status_store.librdkafka`` logger, never raw to stderr; a refused login or certificate is ``security_failures``'s
to name, once."""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

from .security_failures import security_failures

client_log = logging.getLogger("status_store.librdkafka")
# syslog(3) severities, as librdkafka logs them, as Python levels.
SYSLOG_LEVELS = (logging.CRITICAL, logging.CRITICAL, logging.CRITICAL, logging.ERROR, logging.WARNING,
                  logging.INFO, logging.INFO, logging.DEBUG)
# Lines expected on an embedded broker: it has no admin APIs, clients may connect before its listener
# is ready, and it closes idle connections. There they are DEBUG; from a real cluster, WARNING.
_EXPECTED_ON_EMBEDDED = re.compile(r"Connection refused|Disconnected|not supported by broker|"
                                   r"No `bootstrap\.servers` configured")
_THREAD_PREFIX = re.compile(r"^\[thrd:[^\]]*\]: ")
# The same line of the same client again within this many seconds is DEBUG (an unreachable broker
# makes every reconnection attempt log one).
REPEAT_INTERVAL_S = 30.0
# bootstrap.servers of the mock clusters of this process (embedded brokers).
_embedded: set[str] = set()


def mark_embedded(bootstrap_servers: str, embedded: bool = True) -> None:
    """Note that ``bootstrap_servers`` is (or no longer is) a mock cluster of this process."""
    if embedded:
        _embedded.add(bootstrap_servers)
    else:
        _embedded.discard(bootstrap_servers)


def is_embedded(bootstrap_servers: str | None) -> bool:
    """Whether ``bootstrap_servers`` is a mock cluster running in this process (an embedded broker)."""
    return bootstrap_servers in _embedded


class ClientLog:
    """Where one librdkafka client's log lines go: the ``status_store.librdkafka`` logger, with the client's
    name, at the level of their syslog severity; lines expected on an embedded broker are DEBUG there and
    WARNING elsewhere, and repeats within ``REPEAT_INTERVAL_S`` are DEBUG.

    The confluent-kafka clients call ``log`` (their ``logger`` setting) from the thread that polls them.
    """

    def __init__(self, embedded: bool) -> None:
        """``embedded``: the client talks to an embedded broker (see ``is_embedded``)."""
        self.embedded = embedded
        # The last line at WARNING or above, to explain a failure such as an unreachable cluster.
        self.last_problem: str | None = None
        self._lock = threading.Lock()
        self._last_logged: dict[tuple[str, str, str], float] = {}

    def log(self, level: int, fmt: str, facility: str, client: str, text: str) -> None:
        """confluent-kafka's call: ``level`` is already a Python level; the line is ``facility``,
        ``client`` (the handle's name) and ``text``."""
        self.line(level, facility, client, text)

    def line(self, level: int, facility: str, client: str, text: str) -> None:
        """Log one librdkafka line at (about) ``level``."""
        text = _THREAD_PREFIX.sub("", text)
        if _EXPECTED_ON_EMBEDDED.search(text):
            level = logging.DEBUG if self.embedded else logging.WARNING
        if level >= logging.WARNING:
            self.last_problem = text
            # A refused login or certificate is named once for every client (security_failures), not at each retry.
            if security_failures.noticed(facility, text) or self._repeated(facility, client, text):
                level = logging.DEBUG
        client_log.log(level, "%s %s: %s", client, facility, text)

    def _repeated(self, facility: str, client: str, text: str) -> bool:
        # Digits vary between repeats of one line ("after 12ms in state CONNECT").
        key = (client, facility, re.sub(r"\d+", "N", text))
        now = time.monotonic()
        with self._lock:
            last = self._last_logged.get(key)
            if last is not None and now - last < REPEAT_INTERVAL_S:
                return True
            self._last_logged[key] = now
            return False


def client_logging(bootstrap_servers: str | None) -> dict[str, Any]:
    """Client settings sending a Python client's log lines to a new ``ClientLog`` (``logger``)."""
    return {"logger": ClientLog(is_embedded(bootstrap_servers)), "log.thread.name": False}
