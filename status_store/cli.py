"""Command line: ``status-store [--version] serve | status | watch | history | analyze | openapi | config-docs |
config-example``
(also ``python -m status_store``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from typing import NoReturn

from .errors import StatusStoreError


class _Parser(argparse.ArgumentParser):
    """argparse, except that a bad command line is one line (the usage stays in ``--help``), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``status-store`` command."""
    from . import __version__

    parser = _Parser(prog="status-store", description="Kafka Connect status store sidecar.")
    parser.add_argument("--version", action="version", version=f"status-store {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the service (an embedded broker when bootstrap.servers is unset)")
    serve.add_argument("--config", metavar="FILE", help="Java .properties file (a Connect worker file works)")
    # Checked as the configuration keys they override are.
    serve.add_argument("--host", help="HTTP bind address (overrides sidecar.rest.host)")
    serve.add_argument("--port", help="HTTP port (overrides sidecar.rest.port)")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve.add_argument("--log-format", default="text", choices=["text", "json"],
                       help="text lines, or one JSON object per line for a log collector (default: %(default)s)")
    commands.add_parser("openapi", help="print the OpenAPI document of the HTTP API")
    commands.add_parser("config-docs", help="print the configuration reference (docs/configuration.md)")
    commands.add_parser("config-example", help="print the commented example file (config/status-store.properties)")
    status = commands.add_parser("status", help="show statuses from a running status-store, as a table")
    status.add_argument("name", nargs="?", help="a connector (default: every connector)")
    status.add_argument("--url", default="http://127.0.0.1:8084", help="the service (default: %(default)s)")
    watch = commands.add_parser("watch", help="print status changes from a running status-store as they happen")
    watch.add_argument("connector", nargs="?", help="only this connector's changes (default: every connector's)")
    watch.add_argument("--url", default="http://127.0.0.1:8084", help="the service (default: %(default)s)")
    watch.add_argument("--last-event-id", metavar="ID", help="resume after this event (the id an earlier watch "
                       "named when the service stopped)")
    history = commands.add_parser("history", help="a connector's record over the last hour, day and week, from a "
                                                  "running status-store (its history topic)")
    history.add_argument("name", help="the connector")
    history.add_argument("--url", default="http://127.0.0.1:8084", help="the service (default: %(default)s)")
    analyze = commands.add_parser("analyze", help="status analytics with Spark (needs the spark extra and Java 17+)",
                                  description="Read the status and history topics (or exported files), compute the "
                                              "latest statuses, time in state, FAILED episodes, flapping and retry "
                                              "outcomes, write them as Parquet partitioned by date, and a report.")
    from .analytics.options import add_arguments

    add_arguments(analyze)
    args = parser.parse_args(argv)

    if args.command == "analyze":
        return _analyze(args)

    if args.command in ("config-docs", "config-example"):
        from .config import example_properties, reference_markdown

        print(reference_markdown() if args.command == "config-docs" else example_properties(), end="")
        return 0

    if args.command == "status":
        from .client import show_status

        return show_status(args.url, args.name)

    if args.command == "history":
        from .record_client import show_history

        return show_history(args.url, args.name)

    if args.command == "watch":
        from .client import watch as watch_changes

        try:
            return watch_changes(args.url, args.connector, last_event_id=args.last_event_id)
        except KeyboardInterrupt:
            return 130

    if args.command == "openapi":
        from .api import openapi_document

        print(json.dumps(openapi_document(), indent=2, sort_keys=True))
        return 0

    from .logs import EscapingFormatter, JsonFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if args.log_format == "json"
                         else EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler])
    from .config import load_config
    from .service import serve as run_service

    options = {"sidecar.rest.host": args.host, "sidecar.rest.port": args.port}
    try:
        config = load_config(args.config, os.environ, {k: v for k, v in options.items() if v is not None})
        asyncio.run(run_service(config))
    except StatusStoreError as e:
        print(f"status-store: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _analyze(args: argparse.Namespace) -> int:
    try:
        from .analytics.job import execute
    except ImportError as e:
        print(f"status-store analyze needs PySpark ({e}): pip install 'status-store[spark]'", file=sys.stderr)
        return 2
    return execute(args)


if __name__ == "__main__":
    sys.exit(main())
