"""The REST API's credentials that rotate: its TLS certificate, key and client CAs (``ServerTls``), and the write
token (``WriteTokens``), each read again from its file when the file changes, without a restart.

cert-manager renews a certificate in place (a Kubernetes secret's files are swapped under their mount), and a
token is rotated the same way. Files are looked at on use, at most once per ``CHECK_INTERVAL_S``: a TLS handshake
for the certificate (the server picks its context as the client's hello arrives, ``SSLContext.sni_callback``, which
OpenSSL calls on every handshake, with or without a server name), a request that needs the token for the token.
A file is read again when its identity, size or modification time changed. What cannot be used (a half-written
file, a key that does not match its certificate, a token file with no token) keeps what was read before, with a
warning at most once per ``WARN_INTERVAL_S``.
"""

from __future__ import annotations

import hmac
import logging
import os
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..config.rest import ClientAuth, RestTlsConfig
from ..config.store import PLACEHOLDER_TOKEN_PREFIX
from ..errors import ConfigError
from ..logs import RateLimit

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0
WARN_INTERVAL_S = 60.0

_VERIFY = {ClientAuth.REQUIRED: ssl.CERT_REQUIRED, ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
           ClientAuth.NONE: ssl.CERT_NONE}


def _stamp(path: str) -> tuple[int, int, int, int] | None:
    """What tells a file's content changed: its device and inode (a swapped file), size and modification time."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns


@dataclass
class _Watched:
    """Files read together, and when they were last looked at."""

    paths: Sequence[str]
    stamps: tuple[tuple[int, int, int, int] | None, ...] = ()
    checked_at: float = float("-inf")

    def changed(self, now: float) -> bool:
        """Whether any file changed since the last read (looked at once per ``CHECK_INTERVAL_S``)."""
        if now - self.checked_at < CHECK_INTERVAL_S:
            return False
        self.checked_at = now
        return tuple(_stamp(path) for path in self.paths) != self.stamps

    def read(self) -> None:
        """Note the files as read now."""
        self.stamps = tuple(_stamp(path) for path in self.paths)


class ServerTls:
    """The REST API's TLS context: ``context`` goes to the server once; each handshake is served with the files'
    current content."""

    def __init__(self, config: RestTlsConfig, clock: Callable[[], float] = time.monotonic) -> None:
        """Reads the files now: a ``ConfigError`` naming the setting when they cannot be used."""
        assert config.cert_file is not None
        assert config.key_file is not None
        self._config = config
        self._clock = clock
        self._files = _Watched([p for p in (config.cert_file, config.key_file, config.ca_file) if p is not None])
        self._warnings = RateLimit(WARN_INTERVAL_S, clock)
        self._files.read()
        self._files.checked_at = clock()
        self.context = self._load()
        self.context.sni_callback = self._choose
        self._current = self.context

    def _load(self) -> ssl.SSLContext:
        """A context of the files' content; a ``ConfigError`` naming the setting whose file cannot be used."""
        config = self._config
        assert config.cert_file is not None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(config.cert_file, config.key_file)
        except (OSError, ssl.SSLError) as e:
            key = ("sidecar.rest.tls.key.file" if getattr(e, "filename", None) == config.key_file
                   or "KEY_VALUES_MISMATCH" in str(e) else "sidecar.rest.tls.cert.file")
            raise ConfigError(key, getattr(e, "filename", None) or config.cert_file,
                              f"the REST API's certificate and key cannot be used: {e}") from None
        context.verify_mode = _VERIFY[config.client_certificates]
        if config.ca_file is not None:
            try:
                context.load_verify_locations(cafile=config.ca_file)
            except (OSError, ssl.SSLError) as e:
                raise ConfigError("sidecar.rest.tls.ca.file", config.ca_file,
                                  f"the CAs of client certificates cannot be read: {e}") from None
        return context

    def _choose(self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                context: ssl.SSLContext) -> None:
        """OpenSSL's call as a client's hello arrives: the files are read again if they changed, and the handshake
        goes on with their current content."""
        if self._files.changed(self._clock()):
            self._reload()
        if self._current is not context:
            connection.context = self._current

    def _reload(self) -> None:
        try:
            fresh = self._load()
        except ConfigError as e:
            # Kept unread: the next look tries again (a writer may be half-way through the files).
            self._warnings.log(log, logging.WARNING, "The REST API's TLS files changed but cannot be used (%s): "
                               "serving the certificate read before", e)
            return
        self._files.read()
        self._current = fresh
        log.info("The REST API's TLS files changed: new connections get the certificate read now")


class WriteTokens:
    """The bearer tokens writes must carry: ``sidecar.rest.token``, or each line of ``sidecar.rest.token.file``,
    read again when the file changes."""

    def __init__(self, token: str | None = None, path: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Reads the file now: a ``ConfigError`` naming the setting when it holds no token."""
        self._path, self._clock = path, clock
        self._tokens: tuple[bytes, ...] = (token.encode(),) if token is not None else ()
        self._file = _Watched([path] if path is not None else [])
        self._warnings = RateLimit(WARN_INTERVAL_S, clock)
        if path is not None:
            problem = self._reload()
            if problem is not None:
                raise ConfigError("sidecar.rest.token.file", path, problem)

    @property
    def required(self) -> bool:
        """Whether writes need a token."""
        return bool(self._tokens) or self._path is not None

    def accepts(self, given: str) -> bool:
        """Whether ``given`` is one of the tokens (each compared in constant time)."""
        if self._path is not None and self._file.changed(self._clock()):
            problem = self._reload()
            if problem is not None:
                self._warnings.log(log, logging.WARNING, "sidecar.rest.token.file changed but %s: the tokens read "
                                   "before are still accepted", problem)
        data = given.encode()
        return any([hmac.compare_digest(data, token) for token in self._tokens])

    def _reload(self) -> str | None:
        """Read the file; what is wrong with it, or None."""
        assert self._path is not None
        try:
            with open(self._path, "rb") as f:
                text = f.read(64 * 1024).decode("ascii")
        except (OSError, UnicodeDecodeError) as e:
            return f"cannot be read as ASCII text ({e})"
        tokens = tuple(line.strip().encode() for line in text.splitlines() if line.strip())
        if not tokens:
            return "holds no token"
        if any(not token.decode().isprintable() for token in tokens):
            return "holds a token that is not printable ASCII (it travels in an HTTP header)"
        if any(token.decode().lower().startswith(PLACEHOLDER_TOKEN_PREFIX) for token in tokens):
            return "holds the placeholder of the examples: write a long random token (openssl rand -hex 32)"
        self._file.read()
        if self._tokens and tokens != self._tokens:
            log.info("sidecar.rest.token.file changed: %d token(s) accepted from now", len(tokens))
        self._tokens = tokens
        return None
