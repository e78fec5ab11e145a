"""A downstream system a scripted sink writes to (``scripted.downstream=127.0.0.1:<port>``): a TCP listener on
127.0.0.1 that accepts and closes each connection while open, and refuses them (nothing listens) while away. For
auto-restart's tests and benchmark: a sink whose downstream is away fails for real, a transient failure."""

from __future__ import annotations

import contextlib
import socket
import threading

from . import free_port


class Downstream:
    """A port of its own; ``open`` listens on it, ``close`` stops (the scripted sink's connections are refused)."""

    def __init__(self) -> None:
        self.port = free_port()
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """``host:port``, as ``scripted.downstream`` takes it."""
        return f"127.0.0.1:{self.port}"

    def open(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(16)
        self._server = server
        self._thread = threading.Thread(target=self._accept, args=(server,), daemon=True)
        self._thread.start()

    def _accept(self, server: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = server.accept()
                connection.close()

    def close(self) -> None:
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
