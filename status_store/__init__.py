"""status-store: a drop-in, better Kafka Connect status backing store."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("status-store")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
