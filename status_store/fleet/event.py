"""One status event as ``GET /events`` sends it (``StatusEvent``), and its id: a position in the status topic.

An event's id lists, for every partition read so far, the offset of the last record delivered from it
(``0:12,1:40,2:7``): everything up to those offsets has been delivered (``parse_event_id``). An event keeps only
what it sends: a trace's first line (``trace_excerpt``), not the record's value.
"""

from __future__ import annotations

import operator
import re

from ..connect import codec
from ..connect.codec import StatusValue
from ..connect.failures import failure_json
from ..connect.model import Key, State, TaskKey, TopicKey, TopicStatus
from .text import shown

# A trace is cut to its first line, and to this many characters: the whole trace is in GET .../status.
TRACE_EXCERPT_CHARS = 200
_NOT_SPACE = re.compile(r"\S")
# An event's frame, None until built (read at C speed: one call per subscriber and chunk, not per event).
built_frame = operator.attrgetter("_frame")
# What an event holds beyond its text: the event, its key, its status, its id's offsets, its frame's fixed part.
EVENT_OVERHEAD_BYTES = 600
# ASCII digits only (a regular expression's \d takes every script's).
_EVENT_ID = re.compile(r"([0-9]+):(-1|[0-9]+)(,([0-9]+):(-1|[0-9]+))*")


class EventIdTooOld(Exception):
    """A ``Last-Event-ID`` that needs events no longer kept: resuming from it would lose events."""


class StatusEvent:
    """One record applied, as its event sends it: its key and status (the trace cut to its excerpt; a FAILED one's
    failure, from the whole trace), where it was read, and the id of the stream after it. Nothing else of the record
    is kept: a value may be a megabyte.

    ``size``: the bytes it holds, estimated (its text twice, as fields and in its frame once built).
    """

    __slots__ = ("_frame", "_offsets", "_partitions", "failure", "key", "offset", "partition", "size", "status",
                 "timestamp")

    def __init__(self, key: Key, status: StatusValue | TopicStatus | None, partition: int, offset: int,
                 timestamp: float | None, partitions: tuple[int, ...], offsets: tuple[int, ...]) -> None:
        self.key = key
        # A FAILED status's failure as JSON text (None for any other).
        self.failure: str | None = None
        if isinstance(status, StatusValue) and status.state is State.FAILED:
            self.failure = failure_json(status.trace)
        if isinstance(status, StatusValue) and status.trace is not None:
            status = status._replace(trace=trace_excerpt(status.trace))
        # None: a tombstone.
        self.status = status
        self.partition, self.offset, self.timestamp = partition, offset, timestamp
        # The stream's position after this event: each partition read so far (sorted) and its last offset.
        self._partitions = partitions
        self._offsets = offsets
        self._frame: bytes | None = None
        text = len(key.connector)
        if isinstance(status, StatusValue):
            text += len(status.worker_id or "") + len(status.trace or "")
            text += len(self.failure or "")
        elif status is not None:
            text += len(status.topic) + len(status.connector)
        elif isinstance(key, TopicKey):
            text += len(key.topic)
        # Characters as bytes: text outside Latin-1 holds 2 or 4 bytes a character, and is rare here.
        self.size = EVENT_OVERHEAD_BYTES + 8 * len(offsets) + 2 * text

    @property
    def id(self) -> str:
        """The event's id: ``partition:offset`` of every partition read so far, in partition order."""
        return ",".join(f"{p}:{o}" for p, o in zip(self._partitions, self._offsets, strict=True))

    @property
    def connector(self) -> str:
        """The connector the status is of."""
        return self.key.connector

    @property
    def name(self) -> str:
        """The SSE event type: ``status`` for a status set, ``deleted`` for a tombstone."""
        return "deleted" if self.status is None else "status"

    def data(self) -> str:
        """The event's JSON: ``connector``, ``kind``, the task or topic, the status, where it was read."""
        # Strings escaped as the REST routes escape them (Jackson's way): a lone surrogate, which Connect writes
        # when a Java string is cut inside a pair, becomes \\uD800 instead of text UTF-8 cannot encode. Written
        # directly (the fields are known), not through a dict: every event is written once, on the read path.
        # Names and worker ids as every view of the fleet shows them (``text.shown``: cut past a bound).
        key, status = self.key, self.status
        text = '{"connector":' + codec.json_string(shown(key.connector))
        if isinstance(key, TaskKey):
            text += f',"kind":"task","task":{key.task}'
        elif isinstance(key, TopicKey):
            text += ',"kind":"topic","topic":' + codec.json_string(shown(key.topic))
        else:
            text += ',"kind":"connector"'
        if isinstance(status, TopicStatus):
            text += f',"task":{status.task},"discover_timestamp":{status.discover_timestamp}'
        elif status is not None:
            worker = status.worker_id
            text += (f',"state":"{status.state.value}","worker_id":{codec.json_scalar(worker and shown(worker))},'
                     f'"generation":{status.generation},"trace":{codec.json_scalar(status.trace)}')
            if self.failure is not None:
                text += ',"failure":' + self.failure
        return text + (f',"partition":{self.partition},"offset":{self.offset},'
                       f'"timestamp":{codec.json_scalar(self.timestamp)}}}')

    def frame(self) -> bytes:
        """The event as a text/event-stream sends it (built once, however many subscribers get it)."""
        if self._frame is None:
            self._frame = f"id: {self.id}\nevent: {self.name}\ndata: {self.data()}\n\n".encode()
        return self._frame


def trace_excerpt(trace: str | None) -> str | None:
    """A trace's first line, at most ``TRACE_EXCERPT_CHARS`` characters (``…`` marks a cut); it reads no further
    than it needs into a long trace."""
    if trace is None:
        return None
    end = trace.find("\n")
    if end < 0:
        end = len(trace)
    line = trace[:min(end, TRACE_EXCERPT_CHARS + 1)]
    if end <= TRACE_EXCERPT_CHARS + 1:  # the whole first line
        line = line.rstrip("\r")
    cut = len(line) > TRACE_EXCERPT_CHARS or _NOT_SPACE.search(trace, end) is not None
    return line[:TRACE_EXCERPT_CHARS] + ("…" if cut else "")


def parse_event_id(text: str) -> dict[int, int]:
    """An event id's positions: partition -> offset of the last record delivered. ValueError when malformed (a
    partition named twice too: which of its offsets would count?)."""
    if _EVENT_ID.fullmatch(text) is None:
        raise ValueError(f"not an event id of this stream: {text[:100]!r} (expected partition:offset,...)")
    positions: dict[int, int] = {}
    for part in text.split(","):
        partition, offset = part.split(":")
        if int(partition) in positions:
            raise ValueError(f"not an event id of this stream: partition {int(partition)} is named twice")
        positions[int(partition)] = int(offset)
    return positions
