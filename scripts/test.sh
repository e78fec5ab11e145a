#!/usr/bin/env bash
# Set up everything (a virtualenv in .venv with the test extra) and run the whole suite:
# ruff, the package's import contracts (lint-imports), mypy --strict on the package, the benchmarks and their
# harness, then pytest (extra arguments go to pytest).
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
# The real parts (harness/jvm/pom.xml): Apache Kafka's broker and Connect's worker, newest 4.x and last 3.x, from Maven
# Central into a cache outside the repository; a JDK 17 and Maven are installed where missing and this machine allows.
has_jdk() { command -v javac >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 \
    && [ "$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')" -ge 17 ] 2>/dev/null; }
if ! has_jdk && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven) \
        >/dev/null 2>&1 || true
fi
if ! has_jdk; then
    echo "the test suite needs a JDK 17+ (java, javac) and Maven, and could not install them: install openjdk-17-jdk-headless and maven" >&2
    exit 1
fi
export STATUS_STORE_JVM_CACHE="${STATUS_STORE_JVM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/status-store/jvm}"
stamp=$(sha256sum harness/jvm/pom.xml | cut -c1-16)
for line in kafka-4 kafka-3; do
    target="$STATUS_STORE_JVM_CACHE/$line"
    if [ "$(cat "$target/.complete" 2>/dev/null)" != "$stamp" ]; then
        rm -rf "$target" && mkdir -p "$target"
        if ! mvn -q -B -Dstyle.color=never -f harness/jvm/pom.xml -P "$line" dependency:copy-dependencies \
                -DoutputDirectory="$target" >"$target.log" 2>&1; then
            echo "could not fetch Apache Kafka ($line, harness/jvm/pom.xml) from Maven Central: see $target.log" >&2
            exit 1
        fi
        echo "$stamp" >"$target/.complete"
    fi
done
# The agent for stock Connect workers (agent/): its tests, then its jar (agent/target/status-store-agent.jar), which
# the tests attach to real workers. Maven fetches ByteBuddy and JUnit once (~/.m2).
mvn -q -B -Dstyle.color=never -f agent/pom.xml verify
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache >/dev/null || .venv/bin/lint-imports --no-cache
.venv/bin/mypy status_store bench harness
status=0
# Three processes, a test module in one of them, and every module on the shared real Kafka processes in one of them
# (they share the session's brokers and workers: tests/conftest.py groups them); `-n 0` (or any -n) after the command
# overrides it.
# Three on two cores: much of the suite waits (outages, probes, JVM starts), and a third process fills that time
# (14.9 min of pytest against 20.5 min with two, on the same 2-core machine). The groups hold only with pytest
# below 9 (pyproject.toml says why; tests/test_test_groups.py checks it). --no-loadscope-reorder: the groups are handed
# out in tests/conftest.py's order (the longest first, so that the processes end together), not by number of tests.
.venv/bin/pytest -n 3 --dist loadgroup --no-loadscope-reorder "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure, not a pass" >&2
    exit 1
fi
exit "$status"
