"""The analytics in pandas in one process (harness/pandas_history.py), timed on a history's files.

    .venv/bin/python -m bench.pandas_history DATA_DIR OUT_DIR
    .venv/bin/python -m bench.pandas_history --quick
"""

from __future__ import annotations

import time
from pathlib import Path

from bench import BenchParser, quick_scratch
from harness import history_gen
from harness.pandas_history import analyze


def main() -> None:
    """Analyse the history the command line names (or, quick, a small generated one) and write the results."""
    parser = BenchParser(__doc__)
    parser.add_argument("data_dir", type=Path, nargs="?", help="the input (quick: a small generated history)")
    parser.add_argument("out_dir", type=Path, nargs="?", help="where the results go (quick: a temporary directory)")
    args = parser.parse()
    if not args.quick and args.out_dir is None:
        parser.error("DATA_DIR and OUT_DIR are required (or --quick)")
    with quick_scratch(args.quick) as scratch:
        data_dir, out_dir = args.data_dir, args.out_dir
        if scratch is not None:
            if data_dir is None:
                data_dir = scratch / "data"
                history_gen.generate(data_dir, history_gen.QUICK_EVENTS)
            out_dir = out_dir or scratch / "out"
        began = time.perf_counter()
        results = analyze(data_dir)
        results.write(out_dir)
        print(f"pandas: {time.perf_counter() - began:.1f} s; rows: "
              + ", ".join(f"{name} {len(frame):,}" for name, frame in results.present().items()))


if __name__ == "__main__":
    main()
