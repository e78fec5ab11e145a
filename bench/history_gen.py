"""Generate a status history (both topics' records, as Parquet files) for the analytics' benchmarks: the
generator is harness/history_gen.py.

    .venv/bin/python -m bench.history_gen OUT_DIR [--events 1000000] [--seed 7] [--quick]
"""

from __future__ import annotations

import time
from pathlib import Path

from bench import BenchParser
from harness.history_gen import QUICK_EVENTS, generate


def main() -> None:
    """Generate the history the command line asks for."""
    parser = BenchParser(__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_size("--events", type=int, full=1_000_000, quick=QUICK_EVENTS, help="history events")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse()
    began = time.perf_counter()
    generate(args.out_dir, args.events, args.seed)
    print(f"{args.events:,} events in {time.perf_counter() - began:.1f} s -> {args.out_dir}")


if __name__ == "__main__":
    main()
