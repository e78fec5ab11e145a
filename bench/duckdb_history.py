"""The analytics as a consumer into pyarrow and DuckDB SQL (harness/duckdb_history.py), timed.

    .venv/bin/python -m bench.duckdb_history ... (see --help)
"""

from __future__ import annotations

import time
from pathlib import Path

from bench import BenchParser, quick_scratch
from harness import history_gen
from harness.duckdb_history import analyze, read_files, read_topic


def main() -> None:
    """Read both topics (or, quick, a small generated history), analyse them and write the outputs."""
    parser = BenchParser(__doc__)
    parser.add_argument("--bootstrap-servers", help="read the topics from these brokers")
    parser.add_argument("--status-topic", default=history_gen.STATUS_TOPIC)
    parser.add_argument("--history-topic", default=history_gen.HISTORY_TOPIC)
    parser.add_argument("--files", type=Path, help="a directory of status/ and history/ Parquet files instead")
    parser.add_argument("--out", type=Path, help="where the outputs go (quick: a temporary directory)")
    args = parser.parse()
    with quick_scratch(args.quick) as scratch:
        files, out = args.files, args.out
        if scratch is not None:
            if files is None and args.bootstrap_servers is None:
                files = scratch / "data"
                history_gen.generate(files, history_gen.QUICK_EVENTS)
            out = out or scratch / "out"
        if out is None or (files is None) == (args.bootstrap_servers is None):
            parser.error("give --out and either --bootstrap-servers or --files (or --quick)")
        began = time.perf_counter()
        if files is not None:
            status, history = read_files(files / "status"), read_files(files / "history")
        else:
            config = {"bootstrap.servers": args.bootstrap_servers}
            status, history = read_topic(config, args.status_topic), read_topic(config, args.history_topic)
        read = time.perf_counter() - began
        results = analyze(status, history)
        results.write(out)
        print(f"duckdb: {time.perf_counter() - began:.1f} s (reading {read:.1f} s); rows: "
              + ", ".join(f"{name} {len(frame):,}" for name, frame in results.present().items()))


if __name__ == "__main__":
    main()
