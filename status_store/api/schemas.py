"""Request and response bodies of the HTTP API (also the OpenAPI document's schemas)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr

from ..connect.model import INT32_MAX, UNVERSIONED, PluginVersion, State


def _unicode(text: str) -> str:
    """JSON's ``\\ud800`` escape parses to a lone surrogate, which has no UTF-8 form: refuse it (422)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not valid Unicode (a lone surrogate)") from None
    return text


# Text that can be written: valid Unicode (no lone surrogates).
Text = Annotated[StrictStr, AfterValidator(_unicode)]
Generation = Annotated[StrictInt, Field(ge=0, le=INT32_MAX, description="The worker group generation.")]
TaskNumber = Annotated[StrictInt, Field(ge=0, le=INT32_MAX)]
Name = Annotated[Text, Field(min_length=1, max_length=1024)]
TopicName = Annotated[StrictStr, Field(min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StatusBody(_Body):
    """A task status, as a Connect worker reports it."""

    state: State
    trace: Text | None = None
    worker_id: Annotated[Text, Field(min_length=1, max_length=1024)]
    generation: Generation
    version: Annotated[Text, Field(max_length=1024)] | None = Field(
        default=None, description="The running plugin's version (KIP-891, Connect 4.1+). Given, even null, the "
                                  "record carries the field as Connect 4.x writes it; left out, it has none, as "
                                  "Connect 3.x writes it.")

    def plugin_version(self) -> PluginVersion:
        """The status's ``version``: UNVERSIONED when the body left it out (null when it said null)."""
        return self.version if "version" in self.model_fields_set else UNVERSIONED


class ConnectorStatusBody(StatusBody):
    """A connector status, with an optional hint of the connector's type."""

    type: Literal["source", "sink"] | None = None


class TopicStatusBody(_Body):
    """A topic a connector's task has used (KIP-558)."""

    task: TaskNumber
    discoverTimestamp: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] | None = None


class ConnectorUpdate(ConnectorStatusBody):
    """Batch item: write a connector's status."""

    kind: Literal["connector"]
    connector: Name
    safe: bool = False


class TaskUpdate(StatusBody):
    """Batch item: write a task's status."""

    kind: Literal["task"]
    connector: Name
    task: TaskNumber
    safe: bool = False


class TopicUpdate(TopicStatusBody):
    """Batch item: record that a connector uses a topic."""

    kind: Literal["topic"]
    connector: Name
    topic: TopicName


class ConnectorDeletion(_Body):
    """Batch item: delete a connector's statuses (its tasks, then itself)."""

    kind: Literal["delete_connector"]
    connector: Name


class TopicDeletion(_Body):
    """Batch item: forget that a connector uses a topic."""

    kind: Literal["delete_topic"]
    connector: Name
    topic: TopicName


BatchItem = Annotated[
    ConnectorUpdate | TaskUpdate | TopicUpdate | ConnectorDeletion | TopicDeletion, Field(discriminator="kind")
]


class StatusBatch(_Body):
    """Many status updates in one request, applied in order."""

    updates: Annotated[list[BatchItem], Field(min_length=1, max_length=10000)]


class WriteResult(BaseModel):
    """What happened to one write: ``pending`` (accepted), ``written``, ``failed`` or ``superseded``."""

    key: str
    result: Literal["pending", "written", "failed", "superseded", "dropped"]
    attempts: int = 0
    partition: int | None = None
    offset: int | None = None
    reason: str | None = None


class WriteResponse(BaseModel):
    """The answer to a write request."""

    results: list[WriteResult]


class Failure(BaseModel):
    """Why a connector or task FAILED, from its trace (docs/operations.md, "Failure classes"): a field of status-store's
    own, outside Connect's shapes."""

    class_: str = Field(alias="class", description="transient (the network, a timeout, 'not now': a restart helps), "
                                                   "user (configuration, credentials, permissions, something "
                                                   "missing, data or schemas: a restart fails the same way) or "
                                                   "unknown.")
    family: str | None = Field(description="What kind of cause: network, timeout, unavailable, configuration, "
                                           "credentials, permission, missing, data, schema, plugin; null when "
                                           "unknown.")
    cause: str | None = Field(description="The innermost exception of the trace with its message, in one line of "
                                          "200 characters at most.")
    action: str = Field(description="What the failure needs of the operator.")


class ConnectorState(BaseModel):
    """A connector's state in Connect 4.x's status shape: ``worker_id`` null for a status its writer left without
    one; ``version`` (KIP-891) null when the status has none, left out when it is ``undefined``; ``trace`` only
    when there is one."""

    state: str
    worker_id: str | None
    version: str | None = None
    trace: str | None = None
    failure: Failure | None = Field(None, description="Only with ?expand=failure (status-store's own): why it "
                                                      "FAILED, null when it is not FAILED.")


class TaskState(BaseModel):
    """A task's state in Connect 4.x's status shape (the fields as in ConnectorState)."""

    id: int
    state: str
    worker_id: str | None
    version: str | None = None
    trace: str | None = None
    failure: Failure | None = Field(None, description="Only with ?expand=failure (status-store's own): why it "
                                                      "FAILED, null when it is not FAILED.")


class ConnectorStateInfo(BaseModel):
    """Connect's ``GET /connectors/{name}/status`` answer."""

    name: str
    connector: ConnectorState
    tasks: list[TaskState]
    type: str


class ConnectorTaskId(BaseModel):
    """A task of a connector, as Connect names one in ``ConnectorInfo`` and ``TaskInfo``."""

    connector: str
    task: int


class ConnectorInfo(BaseModel):
    """Connect's ``GET /connectors/{name}`` answer, from its config topic: the configuration as stored
    (``${...}`` placeholders unresolved), the committed tasks and the type."""

    name: str
    config: dict[str, str | None]
    tasks: list[ConnectorTaskId]
    type: str


class TaskInfo(BaseModel):
    """One task of Connect's ``GET /connectors/{name}/tasks`` answer: its committed configuration (null when the
    config topic lacks it)."""

    id: ConnectorTaskId
    config: dict[str, str | None] | None


class ConnectorExpansions(BaseModel):
    """One connector of ``GET /connectors?expand=...``: ``status`` when asked, ``info`` when asked (null for a
    connector without a configuration); neither for other expansions."""

    status: ConnectorStateInfo | None = None
    info: ConnectorInfo | None = None


class ErrorBody(BaseModel):
    """Connect's error body."""

    error_code: int
    message: str


class PendingRetry(BaseModel):
    """An update waiting for its next attempt."""

    key: str
    kind: str
    attempts: int
    next_attempt_in_seconds: float
    held: bool = Field(description="Waits in a held partition's line (the next probe's time is the earliest it may "
                                   "go), rather than on a timer of its own.")
    last_error: str | None


class ParkedUpdate(BaseModel):
    """An update parked after its last retry (``status.storage.retry.exhausted.action=park``)."""

    key: str
    kind: str
    attempts: int
    last_error: str | None


class Readiness(BaseModel):
    """``GET /ready``: the broker answers and the cache has caught up with the topic."""

    status: str
    message: str


class FleetTask(BaseModel):
    """A task of ``GET /fleet``."""

    id: int
    state: str
    worker_id: str | None
    since: float = Field(description="When the task entered its state: the Kafka timestamp of the record that "
                                     "changed it, in seconds since the epoch.")
    trace: str | None = Field(description="The first line of the trace, at most 200 characters.")
    worker_gone_since: float | None = Field(None, description="When the worker the status names left the Connect "
                                                              "group (group.id), in seconds since the epoch; null "
                                                              "while it is a member or the group is not read.")
    worker_stuck_since: float | None = Field(None, description="Since when the worker the status names, in the "
                                                               "Connect group, is stuck (its GET /health answers "
                                                               "500 or nothing), in seconds since the epoch; null "
                                                               "while it is not.")
    restarts: FleetRestarts | None = Field(None, description="Auto-restart of it (null: never planned, or off).")
    failure: Failure | None = Field(None, description="Why it FAILED, from its trace (null unless FAILED).")


class FleetRestarts(BaseModel):
    """A connector's or task's auto-restarts (``sidecar.restart.*``)."""

    count: int = Field(description="Restarts counted now (reset once it has run for sidecar.restart.stable.ms).")
    last: float | None = Field(description="When the last restart was accepted, in seconds since the epoch.")
    result: str | None = Field(description="How the last request went: restarted, rebalancing, unreachable, refused, "
                                           "not-found, not-failed (the worker, asked first, did not say FAILED "
                                           "on itself: nothing was restarted), unauthorized (401 or 403) or "
                                           "tls-failed.")
    state: str = Field(description="idle, waiting (a restart planned), sending, last (the last allowed one was "
                                   "sent), gave-up (sidecar.restart.max.restarts reached) or excluded.")
    next: float | None = Field(description="When the planned restart is due, in seconds since the epoch.")
    reason: str | None = Field(description="The first line of the trace of the last failure.")
    skipped: str | None = Field(None, description="Why the last failure is not restarted: failure_class (of a class "
                                                  "sidecar.restart.classes does not restart), excluded_trace, "
                                                  "excluded_connector or max_restarts; null when it is.")


class FleetWorker(BaseModel):
    """A worker of ``GET /fleet``: in the Connect group, or named by a status."""

    id: str
    url: str | None
    up: bool = Field(description="Whether it is a member of the Connect group now.")
    gone_since: float | None = Field(description="When it left the group (or the first read of the group, for a "
                                                 "worker never seen in it), in seconds since the epoch.")
    health: str | None = Field(None, description="Its last GET /health (KIP-1017): healthy, slow (200, after more "
                                                 "than 5 s), starting, unhealthy (500), no-answer, unreachable, "
                                                 "unsupported (no /health), unauthorized or tls-failed; null: not "
                                                 "asked (not in the group).")
    health_message: str | None = Field(None, description="What the worker's GET /health said (its message), or why "
                                                         "there was no answer.")
    health_latency_s: float | None = Field(None, description="How long the last GET /health took.")
    stuck_since: float | None = Field(None, description="Since when it is stuck in the group (null: it is not).")


class FleetConnector(BaseModel):
    """A connector of ``GET /fleet``: its status (null fields when it has none, being only configured) and tasks."""

    name: str
    type: str
    configured: bool = Field(description="Whether Connect's config topic holds its configuration.")
    state: str | None
    worker_id: str | None
    since: float | None
    trace: str | None
    health: str | None = Field(None, description="HEALTHY, DEGRADED, UNHEALTHY, PAUSED or STOPPED "
                                                 "(docs/operations.md); null without a status of its own.")
    worker_gone_since: float | None = None
    worker_stuck_since: float | None = None
    restarts: FleetRestarts | None = None
    failure: Failure | None = None
    tasks: list[FleetTask]


class Fleet(BaseModel):
    """``GET /fleet``: every connector and task at once, and where ``GET /events`` stood when it was read."""

    id: str | None = Field(description="The event id of the stream's position (null before any record was read).")
    position: dict[str, int] = Field(description="The same, by partition: the offset of the last event published. "
                                                 "An event at or below it is already in this answer.")
    heartbeat_ms: int = Field(description="How often GET /events sends a heartbeat when nothing else.")
    connectors: list[FleetConnector]
    workers: list[FleetWorker] | None = Field(None, description="The workers in the Connect group or named by a "
                                                                "status (null: the group is not read, no group.id).")


class RecoveryFigures(BaseModel):
    """Recovered FAILED episodes and their mean time to recovery."""

    episodes: int
    mean_ms: float | None


class HistoryFigures(BaseModel):
    """A connector's or task's record over a window: as ``status-store analyze`` computes it on the same history."""

    start: int = Field(description="The window's start (ms since the epoch; later than as_of minus the window when "
                                   "less history is kept).")
    as_of: int
    durations_ms: dict[str, int] = Field(description="Time in each state within the window.")
    availability: float | None = Field(description="The share of that time RUNNING (null: no time in any state).")
    failures: int = Field(description="FAILED episodes that began in the window.")
    recovered: int
    unrecovered: int
    restarts: dict[str, int] = Field(description="The sidecar's restart requests in the window, by result.")
    recovery_with_restart: RecoveryFigures
    recovery_without_restart: RecoveryFigures


class WindowHistory(BaseModel):
    """One window of a connector's record: its own status's, each task's, its tasks' together."""

    connector: HistoryFigures | None
    tasks: dict[str, HistoryFigures]
    all_tasks: HistoryFigures | None


class ConnectorHistory(BaseModel):
    """``GET /connectors/{name}/history``."""

    name: str
    as_of: int
    history_topic: str | None
    windows: dict[str, WindowHistory] = Field(description="By window: 1h, 1d, 7d.")
    events: list[dict[str, Any]] = Field(description="State changes ({time, kind, task, state}) and the sidecar's "
                                                     "restarts ({time, kind, task, restart, failed_at}), newest "
                                                     "first.")
    next_before: int | None = Field(description="Pass as before for the next page (null: no more).")
