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
    watch = commands.add_parser("watch", help="print status changes from a running status-store as they happen")
    watch.add_argument("connector", nargs="?", help="only this connector's changes (default: every connector's)")
    watch.add_argument("--last-event-id", metavar="ID", help="resume after this event (the id an earlier watch "
                       "named when the service stopped)")
    history = commands.add_parser("history", help="a connector's record over the last hour, day and week, from a "
                                                  "running status-store (its history topic)")
    history.add_argument("name", help="the connector")
    for client_command, bound in ((status, "the whole command"), (watch, "the stream's first answer"),
                                  (history, "the whole command")):
        _client_arguments(client_command, bound)
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

    if args.command == "history":
        from .client import Tls
        from .record_client import show_history

        return show_history(args.url, args.name, tls=Tls(args.cacert, args.cert, args.key), timeout_s=args.timeout)

    if args.command in ("status", "watch"):
        from .client import Tls, show_status
        from .client import watch as watch_changes

        tls = Tls(args.cacert, args.cert, args.key)
        if args.command == "status":
            return show_status(args.url, args.name, tls=tls, timeout_s=args.timeout)
        try:
            return watch_changes(args.url, args.connector, last_event_id=args.last_event_id, tls=tls,
                                 timeout_s=args.timeout)
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
    except StatusStoreError as e:
        print(f"status-store: {e}", file=sys.stderr)
        return 2
    code = 0
    try:
        asyncio.run(run_service(config))
    except StatusStoreError as e:
        print(f"status-store: {e}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    except SystemExit as e:  # the service's own verdict (updates lost at the stop)
        code = e.code if isinstance(e.code, int) else 1
    _exit_now(code)


def _exit_now(code: int) -> NoReturn:
    """End the process once the service has stopped: everything it must do at the end is done (the spool closed,
    what was lost logged), so the interpreter's own finalization (module teardown, the Kafka clients' destructors,
    joining idle threads) is skipped, and the stop keeps to its bound (sidecar.shutdown.timeout.ms); on a starved
    CPU that finalization alone took 0.45 s."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _client_arguments(command: argparse.ArgumentParser, bound: str) -> None:
    """The options of the commands that ask a running service: where, how (HTTPS), how long."""
    command.add_argument("--url", default="http://127.0.0.1:8084", help="the service (default: %(default)s)")
    command.add_argument("--cacert", metavar="FILE", help="with an https:// URL: the CA file (PEM) to trust "
                         "(default: the system's CAs)")
    command.add_argument("--cert", metavar="FILE", help="a client certificate (PEM) to present, for a service that "
                         "asks for one (mutual TLS); its key in it or in --key")
    command.add_argument("--key", metavar="FILE", help="the client certificate's key (PEM)")
    command.add_argument("--timeout", metavar="SECONDS", type=_seconds, default=60.0,
                         help=f"the most {bound} may take (default: %(default)g)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def _analyze(args: argparse.Namespace) -> int:
    try:
        from .analytics.job import execute
    except ImportError as e:
        print(f"status-store analyze needs PySpark ({e}): pip install 'status-store[spark]'", file=sys.stderr)
        return 2
    return execute(args)


if __name__ == "__main__":
    sys.exit(main())
