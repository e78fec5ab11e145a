#!/usr/bin/env bash
# Set up everything (a virtualenv in .venv with the test extra) and run the whole suite:
# ruff, mypy --strict on the package, then pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
.venv/bin/ruff check .
.venv/bin/mypy status_store
status=0
.venv/bin/pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure, not a pass" >&2
    exit 1
fi
exit "$status"
