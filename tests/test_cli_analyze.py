"""Without the spark extra, the service still imports and `status-store analyze` says what to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap

WITHOUT_SPARK = textwrap.dedent("""
    import sys

    class NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pyspark", "pyarrow", "pandas", "matplotlib"):
                raise ImportError(f"No module named {name!r}")

    sys.meta_path.insert(0, NotInstalled())
    import status_store.service
    from status_store import cli

    sys.exit(cli.main(["analyze", "--files", "records.jsonl", "--out", "out"]))
""")


def test_without_pyspark_the_service_imports_and_analyze_exits_2() -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_SPARK], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 2, done.stderr
    assert "pip install 'status-store[spark]'" in done.stderr
