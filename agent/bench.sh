#!/usr/bin/env bash
# The agent's micro benchmark (docs/BENCHMARKS.md, "The agent's table under its lock"): builds the agent's classes and
# runs path/RouterBench, which prints one JSON line per measure and round. Arguments: keys (10000), rounds (3).
#   HEAVY_ALL=1 /work/tools/heavy agent/bench.sh 10000 3
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mvn -q -B -f "$here/pom.xml" test-compile dependency:build-classpath -Dmdep.includeScope=test \
    -Dmdep.outputFile="$here/target/bench.classpath"
exec java -Xms256m -Xmx512m -cp "$here/target/classes:$here/target/test-classes:$(cat "$here/target/bench.classpath")" \
    io.statusstore.agent.path.RouterBench "$@"
