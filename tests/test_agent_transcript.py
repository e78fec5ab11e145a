"""The agent protocol's transcript (agent/src/test/resources/protocol-transcript.json) replayed against the real
sidecar: the app on the embedded broker answers every request as written there. The Java tests replay the same file
against their FakeSidecar (path/TranscriptTest.java), so the fake the agent's tests rely on answers as the sidecar
does, case by case."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry

from harness.faulty_cluster import FaultyCluster
from status_store.api import create_app

from .conftest import Broker, StoreFactory
from .helpers import eventually_awaited

TRANSCRIPT = Path(__file__).parent.parent / "agent" / "src" / "test" / "resources" / "protocol-transcript.json"
CASES: list[dict[str, Any]] = json.loads(TRANSCRIPT.read_text())["cases"]
UNTIL_S = 10.0
# As tests/test_agent_route.py's store: quick retries and probes.
STORE = {"status.storage.retry.initial.backoff.ms": "50", "status.storage.retry.probe.max.backoff.ms": "100"}


def filled(template: Any, instance: str) -> Any:
    """A request body with "$now" and "$instance" filled in."""
    if template == "$now":
        return int(time.time() * 1000)
    if template == "$instance":
        return instance
    if isinstance(template, dict):
        return {key: filled(value, instance) for key, value in template.items()}
    if isinstance(template, list):
        return [filled(value, instance) for value in template]
    return template


def differences(expected: Any, actual: Any, instance: str, where: str = "") -> list[str]:
    """Where ``actual`` is not what the transcript expects ("*": anything; "$instance": the instance)."""
    if expected == "*":
        return []
    if expected == "$instance":
        return [] if actual == instance else [f"{where}: {actual!r}, not the instance {instance!r}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(expected) != set(actual):
            return [f"{where}: {actual!r} has not the keys of {expected!r}"]
        return [d for key in expected for d in differences(expected[key], actual[key], instance, f"{where}.{key}")]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            return [f"{where}: {actual!r}, not {expected!r}"]
        return [d for i, item in enumerate(expected) for d in differences(item, actual[i], instance, f"{where}[{i}]")]
    return [] if expected == actual and type(expected) is type(actual) else [f"{where}: {actual!r}, not {expected!r}"]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
async def test_the_sidecar_answers_as_the_transcript_says(case: dict[str, Any], mock_cluster: FaultyCluster,
                                                         store_factory: StoreFactory, tmp_path: Path) -> None:
    settings = dict(case.get("settings", {}))
    token = settings.pop("sidecar.rest.token", None)
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=CollectorRegistry(),
                             **{**STORE, "status.storage.spool.path": str(tmp_path / "spool.db"), **settings}) as store:
        app = create_app(store, token=token)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sidecar") as http:
            instance = (await http.get("/")).json()["instance"]
            for number, step in enumerate(case["steps"]):
                if "kafka" in step:
                    if step["kafka"] == "away":
                        mock_cluster.push_request_errors(FaultyCluster.PRODUCE,
                                                         *[KafkaError.NOT_ENOUGH_REPLICAS] * 100_000)
                    elif step["kafka"] == "down":
                        mock_cluster.broker_down(-1)
                    elif step["kafka"] == "up":
                        mock_cluster.broker_up(-1)
                    else:
                        mock_cluster.clear_request_errors(FaultyCluster.PRODUCE)
                    continue
                if "sleep_ms" in step:  # a pause the transcript holds (a lease running out): the step itself
                    await asyncio.sleep(step["sleep_ms"] / 1000)
                    continue
                await answered_as_written(http, step, instance, f"step {number}")


async def answered_as_written(http: httpx.AsyncClient, step: dict[str, Any], instance: str, where: str) -> None:
    """Post the step's body (again, while "until" and the answer differs) and compare the answer."""
    headers = {"Authorization": f"Bearer {step['token']}"} if "token" in step else {}
    expect = step["expect"]

    async def found() -> list[str]:
        path, body = ("/agent/wake", step["wake"]) if "wake" in step else ("/agent/statuses", step["post"])
        response = await http.post(path, json=filled(body, instance), headers=headers)
        differ = differences(expect["status"], response.status_code, instance, "status")
        differ += differences(expect["body"], response.json(), instance, "body")
        for name, value in expect.get("headers", {}).items():
            if name not in response.headers or (value != "*" and response.headers[name] != value):
                differ.append(f"header {name}: {response.headers.get(name)!r}, not {value!r}")
        return differ

    if step.get("until"):
        await eventually_awaited(found, lambda differ: not differ, UNTIL_S, what=where)
    else:
        assert not (differ := await found()), f"{where}: {differ}"
