"""status-store: a drop-in, better Kafka Connect status backing store.

The public surface: ``StatusStore`` with its configuration, the status values it stores, the
``StatusUpdate`` handle ``put`` returns, and the errors a caller can see (``errors.py``).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("status-store")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

from .config import StoreConfig, build_config, load_config
from .connect.model import ConnectorStatus, State, TaskId, TaskStatus, TopicStatus
from .errors import (
    ConfigError,
    KafkaUnavailableError,
    StatusStoreError,
    StoreClosedError,
    TopicSetupError,
    WriteFailedError,
)
from .retry.updates import Outcome, Result, StatusUpdate
from .store import StatusStore

__all__ = [
    "ConfigError",
    "ConnectorStatus",
    "KafkaUnavailableError",
    "Outcome",
    "Result",
    "State",
    "StatusStore",
    "StatusStoreError",
    "StatusUpdate",
    "StoreClosedError",
    "StoreConfig",
    "TaskId",
    "TaskStatus",
    "TopicSetupError",
    "TopicStatus",
    "WriteFailedError",
    "__version__",
    "build_config",
    "load_config",
]
