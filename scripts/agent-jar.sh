#!/usr/bin/env bash
# The agent for stock Connect workers, from a source checkout: builds agent/ with Maven (its tests too) when the
# jar is missing or older than its sources, then prints the jar's path. Needs a JDK 8+ and Maven.
#   KAFKA_OPTS="-javaagent:$(./scripts/agent-jar.sh)=url=http://127.0.0.1:8084" bin/connect-distributed.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
jar=agent/target/status-store-agent.jar
if [ ! -f "$jar" ] || [ -n "$(find agent/pom.xml agent/src -newer "$jar" -print -quit)" ]; then
    mvn -q -B -Dstyle.color=never -f agent/pom.xml verify >&2
fi
echo "$PWD/$jar"
