#!/usr/bin/env bash
# Set up everything (a virtualenv in .venv with the test extra) and run the whole suite:
# ruff, mypy --strict on the package and the benchmarks, then pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
# The Prometheus test needs a real Prometheus, and the analytics report's test a real headless browser (Debian's
# prometheus and chromium packages); install them where this machine allows.
missing=""
command -v promtool >/dev/null 2>&1 || missing="$missing prometheus"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing) >/dev/null 2>&1 \
        || echo "could not install$missing: their tests will be skipped" >&2
fi
.venv/bin/ruff check .
.venv/bin/mypy status_store bench
status=0
# Two processes, a test module in one of them; `-n 0` (or any -n) after the command overrides it.
.venv/bin/pytest -n 2 --dist loadfile "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure, not a pass" >&2
    exit 1
fi
exit "$status"
