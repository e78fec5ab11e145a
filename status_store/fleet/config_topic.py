"""Connect's config topic, read only (``ConfigTopic``): read whole from the beginning at start, then tailed, as
every Connect worker reads it, into ``connect.configs.ConnectorConfigs`` (what Connect keeps of it, and the record
format). Never written, never created: a sidecar started before its worker waits for the worker to create it.
Configuration values are never logged (they may hold secrets).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from confluent_kafka import Message

from ..connect.configs import ConnectorConfigs
from ..errors import TopicSetupError
from ..kafka.reader import TopicReader
from ..kafka.topics import wait_for_topic

log = logging.getLogger(__name__)


class ConfigTopic:
    """The reader of Connect's config topic: read to its end at start, then tailed (never written)."""

    def __init__(self, topic: str, bootstrap_servers: str, client_configs: Mapping[str, str]) -> None:
        self.topic = topic
        self.configs = ConnectorConfigs()
        self._bootstrap, self._client_configs = bootstrap_servers, client_configs
        self._log = TopicReader(topic, bootstrap_servers, client_configs, self._apply)

    async def start(self, timeout: float, waiting: Callable[[str], None] = lambda why: None) -> None:
        """Wait for the topic (a Connect worker creates it when it first starts), telling ``waiting`` what is waited
        for; then read it to its end, bounded by ``timeout``."""
        await wait_for_topic(self._bootstrap, self._client_configs, self.topic, lambda why: waiting(
            f"Connect's config topic {self.topic!r} ({why}; a Connect worker creates it when it first starts)"))
        try:
            await self._log.start(timeout)
        except TopicSetupError as e:
            raise TopicSetupError(f"config.storage.topic {self.topic!r} cannot be read ({e})") from None
        log.info("Config topic %s read: %d connectors configured", self.topic, len(self.configs.connectors()))

    async def read_to_end(self, timeout: float | None = None) -> None:
        """Wait until everything written to the topic before this call has been read."""
        await self._log.read_to_end(timeout)

    async def stop(self) -> None:
        """Stop reading."""
        await self._log.stop()

    def _apply(self, records: Sequence[Message]) -> None:
        for record in records:
            raw_key = record.key()
            if raw_key is None:
                log.error("Skipping a config topic record without a key at partition %s offset %s",
                          record.partition(), record.offset())
                continue
            key = raw_key.decode("utf-8", "replace") if isinstance(raw_key, bytes) else raw_key
            self.configs.apply(key, record.value())
