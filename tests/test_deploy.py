"""Deployment files: they parse, reference only what exists, pass promtool, and a real Prometheus
scrapes a running service and sees the KIP-1278 counters move."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry, generate_latest

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from status_store.api import create_app, openapi_document
from status_store.config import SETTINGS, build_config, parse_properties, reference_markdown
from status_store.connect.model import ConnectorStatus, State
from status_store.errors import ConfigError

from .conftest import Broker, StoreFactory
from .helpers import eventually, eventually_awaited, write_raw

ROOT = Path(__file__).parent.parent
DEPLOY = ROOT / "deploy"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
needs_prometheus = pytest.mark.skipif(PROMTOOL is None or PROMETHEUS is None,
                                      reason="Debian's prometheus package is not installed (scripts/test.sh installs "
                                             "it where the machine allows)")
NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS
INVALID_RECORD = KafkaError.INVALID_RECORD
WAIT = 30.0


def manifests() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / "kubernetes" / "connect-with-status-store.yaml").read_text())
            if doc]


def sidecar(docs: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "status-store")


def test_the_kubernetes_scrape_config_parses_and_matches_the_annotations() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus-kubernetes.yml").read_text())
    relabel = config["scrape_configs"][0]["relabel_configs"]
    port = next(r for r in relabel if r["source_labels"] == ["__meta_kubernetes_pod_container_port_number"])
    assert port["regex"] == str(sidecar(manifests())["ports"][0]["containerPort"])


def test_manifests_parse_and_reference_real_endpoints_and_settings() -> None:
    docs = manifests()
    paths = set(openapi_document()["paths"])
    container = sidecar(docs)
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["startupProbe"]["httpGet"]["path"] == "/health"
    startup = container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert {"/health", "/ready", "/metrics"} <= paths
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    properties = parse_properties(config_map["data"]["status-store.properties"])
    env = {e["name"][len("STATUS_STORE_"):].lower().replace("_", "."): "x" for e in container["env"]}
    config = build_config({**properties, **env})  # every key exists and every value is valid
    assert config.rest_token == "x"
    assert startup > config.startup_timeout_s
    annotations = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == config.rest_port == container["ports"][0]["containerPort"]
    assert annotations["prometheus.io/path"] == "/metrics"
    assert container["args"][-1] == container["volumeMounts"][0]["mountPath"] + "/status-store.properties"


def test_dashboard_is_json_and_uses_real_metrics() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "status-store-dashboard.json").read_text())
    exprs = json.dumps(dashboard)
    for name in ("status_update_success_total", "status_update_failure_total", "status_update_retry_total",
                 "status_connectors", "status_tasks", "status_task_state", "status_connector_state",
                 "status_task_state_changed_timestamp_seconds"):
        assert name in exprs
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_every_alert_has_its_runbook_section() -> None:
    anchors = {"docs/operations.md#" + "".join(c for c in line.lstrip("#").strip().lower().replace(" ", "-")
                                              if c.isalnum() or c == "-")
               for line in (ROOT / "docs" / "operations.md").read_text().splitlines() if line.startswith("#")}
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    missing = [(a["alert"], a["annotations"]["runbook"]) for a in alerts if a["annotations"]["runbook"] not in anchors]
    assert missing == []


def test_configuration_reference_is_in_sync() -> None:
    assert (ROOT / "docs" / "configuration.md").read_text() == reference_markdown(), (
        "docs/configuration.md drifted: run `status-store config-docs > docs/configuration.md`")


def test_example_configuration_names_only_real_keys() -> None:
    known = {s.key for s in SETTINGS}
    text = (ROOT / "config" / "status-store.properties").read_text()
    # Settings, including commented-out ones ("#key=value"); prose comments have spaces before any '='.
    keys = [line.lstrip("#").split("=", 1)[0] for line in text.splitlines()
            if "=" in line and " " not in line.lstrip("#").split("=", 1)[0]]
    unknown = [k for k in keys if k not in known and not k.startswith(("status.storage.", "sidecar.kafka.", "sasl.",
                                                                        "security.", "ssl."))]
    assert unknown == []
    assert known <= set(keys)


def example_spool_path() -> PurePosixPath:
    """The spool path of the example configuration (commented out there)."""
    text = (ROOT / "config" / "status-store.properties").read_text()
    value = next(line.lstrip("#").split("=", 1)[1] for line in text.splitlines()
                 if line.lstrip("#").startswith("status.storage.spool.path="))
    return PurePosixPath(value)


def unit_settings(path: Path) -> dict[str, list[str]]:
    """The [Service] settings of a systemd unit (a key may repeat)."""
    settings: dict[str, list[str]] = {}
    section = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


def test_the_example_spool_path_is_writable_under_the_systemd_unit() -> None:
    unit = unit_settings(DEPLOY / "systemd" / "status-store.service")
    spool = example_spool_path()
    assert unit["ProtectSystem"] == ["strict"]  # everything but the paths below is read-only
    writable = [PurePosixPath(p) for value in unit.get("ReadWritePaths", []) for p in value.split()]
    writable += [PurePosixPath("/var/lib") / d for value in unit.get("StateDirectory", []) for d in value.split()]
    assert any(spool.parent.is_relative_to(w) for w in writable), (spool, writable)
    assert unit["StateDirectoryMode"] == ["0700"]


def test_the_pods_spool_path_is_on_a_writable_volume() -> None:
    docs = manifests()
    container = sidecar(docs)
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    spool = PurePosixPath(parse_properties(config_map["data"]["status-store.properties"])["status.storage.spool.path"])
    assert spool == example_spool_path()
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mount = next(m for m in container["volumeMounts"] if spool.is_relative_to(m["mountPath"]))
    assert not mount.get("readOnly", False)
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert "emptyDir" in volume or "persistentVolumeClaim" in volume


def test_the_image_has_a_writable_place_for_the_example_spool() -> None:
    lines = (DEPLOY / "Containerfile").read_text().replace("\\\n", " ").splitlines()
    directory = str(example_spool_path().parent)
    assert f"VOLUME {directory}" in lines
    run = " ".join(line for line in lines if line.startswith("RUN "))
    assert "useradd --system --uid 10001 status-store" in run
    assert f"install -d -m 0700 -o status-store -g status-store {directory}" in run
    assert "USER 10001" in lines


def test_the_pod_gets_no_service_link_variables() -> None:
    pod = next(d for d in manifests() if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["enableServiceLinks"] is False


def test_the_shipped_placeholder_tokens_are_refused() -> None:
    secret = next(d for d in manifests() if d["kind"] == "Secret")
    example = parse_properties("\n".join(line.lstrip("#") for line in
                                         (ROOT / "config" / "status-store.properties").read_text().splitlines()
                                         if line.lstrip("#").startswith("sidecar.rest.token=")))
    for token in (secret["stringData"]["token"], example["sidecar.rest.token"]):
        with pytest.raises(ConfigError, match="placeholder"):
            build_config({"sidecar.rest.token": token})


RULE_FILES = ("alerts.yml", "recording-rules.yml")
RULE_TESTS = sorted((ROOT / "tests" / "promtool").glob("*.test.yml"))


def promtool(*args: str) -> None:
    """Run promtool and fail with its output unless it succeeds."""
    result = subprocess.run([str(PROMTOOL), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_prometheus
def test_promtool_accepts_the_scrape_config_and_the_rules() -> None:
    promtool("check", "config", str(DEPLOY / "prometheus" / "prometheus.yml"))
    for rules in RULE_FILES:
        promtool("check", "rules", str(DEPLOY / "prometheus" / rules))


def test_both_scrape_configs_load_every_rule_file() -> None:
    for config in ("prometheus.yml", "prometheus-kubernetes.yml"):
        assert yaml.safe_load((DEPLOY / "prometheus" / config).read_text())["rule_files"] == list(RULE_FILES)


@needs_prometheus
@pytest.mark.parametrize("rule_test", RULE_TESTS, ids=[t.name for t in RULE_TESTS])
def test_the_rules_record_and_alert_as_their_unit_tests_say(rule_test: Path) -> None:
    """Prometheus's own rule evaluation (promtool test rules) over given input series."""
    promtool("test", "rules", str(rule_test))


async def served_exposition(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> bytes:
    """What /metrics serves: the store's metrics and the HTTP metrics, after one write."""
    registry = CollectorRegistry()
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry) as store:
        app = create_app(store, registry)  # registers the HTTP metrics too
        await store.put(ConnectorStatus("c", State.RUNNING, "w:1", 1)).result(WAIT)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sidecar") as http:
            assert (await http.get("/health")).status_code == 200
        return generate_latest(registry)


@needs_prometheus
async def test_promtool_accepts_the_exposition(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    exposition = await served_exposition(mock_cluster, store_factory)
    result = await asyncio.to_thread(subprocess.run, [str(PROMTOOL), "check", "metrics"], input=exposition,
                                     capture_output=True, timeout=60)
    assert result.returncode == 0, (result.stdout + result.stderr).decode()


async def test_the_exposition_has_no_created_series(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    text = (await served_exposition(mock_cluster, store_factory)).decode()
    assert 'status_update_success_total{kind="connector"} 1.0' in text
    assert "http_requests_total{" in text
    assert "_created" not in text


# A query's result: each series' labels (its name among them) and its value.
Samples = dict[frozenset[tuple[str, str]], float]


class Prometheus:
    """A real Prometheus server on 127.0.0.1 scraping one target every second."""

    def __init__(self, tmp: Path, target: str, rule_files: tuple[Path, ...] = ()) -> None:
        self.port = free_port()
        config = tmp / "prometheus.yml"
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules) for rules in rule_files],
            "scrape_configs": [{"job_name": "status-store", "static_configs": [{"targets": [target]}]}],
        }))
        self.process = subprocess.Popen(
            [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def samples(self, query: str) -> Samples | None:
        """The query's result now: each series' labels (the name among them) and value; None if no answer."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?query={urllib.parse.quote(query)}"
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                result = (await http.get(url)).json()["data"]["result"]
        except (httpx.HTTPError, KeyError, ValueError):
            return None
        return {frozenset(sample["metric"].items()): float(sample["value"][1]) for sample in result}

    async def value(self, query: str) -> float | None:
        samples = await self.samples(query)
        return next(iter(samples.values()), None) if samples else None

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
async def served_store(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> AsyncIterator[tuple[Any, str]]:
    registry = CollectorRegistry()
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry,
                             **{"status.storage.retry.initial.backoff.ms": "50"}) as store:
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(create_app(store, registry), host="127.0.0.1", port=port,
                                               log_config=None, access_log=False))
        task = asyncio.create_task(server.serve())
        await eventually(lambda: server.started)
        try:
            yield store, f"127.0.0.1:{port}"
        finally:
            server.should_exit = True
            await asyncio.wait_for(task, WAIT)


@needs_prometheus
async def test_a_real_prometheus_sees_the_kip_counters_move(served_store: tuple[Any, str], mock_cluster: FaultyCluster,
                                                            tmp_path: Path) -> None:
    store, target = served_store
    prometheus = Prometheus(tmp_path, target)
    try:
        assert (await store.put(ConnectorStatus("a", State.RUNNING, "w:1", 1)).result(WAIT)).ok
        mock_cluster.push_request_errors(FaultyCluster.PRODUCE, NOT_ENOUGH_REPLICAS)
        assert (await store.put(ConnectorStatus("b", State.RUNNING, "w:1", 1)).result(WAIT)).ok
        mock_cluster.push_request_errors(FaultyCluster.PRODUCE, INVALID_RECORD)
        assert not (await store.put(ConnectorStatus("c", State.RUNNING, "w:1", 1)).result(WAIT)).ok
        expected = {"status_update_success_total": 2.0, "status_update_retry_total": 1.0,
                    "status_update_failure_total": 1.0}

        async def seen() -> dict[str, float | None]:
            return {name: await prometheus.value(f'{name}{{kind="connector"}}') for name in expected}

        # Prometheus scrapes every second: the counters come within a few scrapes.
        await eventually_awaited(seen, lambda found: found == expected, timeout=WAIT, interval=0.5,
                                 what="what Prometheus holds")
    finally:
        prometheus.stop()


def connect_status(state: str, worker_id: str, generation: int, trace: str | None = None) -> bytes:
    """A status value exactly as a Connect worker writes it (fields in Connect's order, compact JSON)."""
    return json.dumps({"state": state, "trace": trace, "worker_id": worker_id, "generation": generation},
                      separators=(",", ":")).encode()


def series(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset({"job": "status-store", **labels}.items())


@needs_prometheus
async def test_a_real_prometheus_sees_a_workers_status_change(served_store: tuple[Any, str], tmp_path: Path) -> None:
    """A plain producer writes Connect's records, as a worker does: Prometheus sees the task's series change,
    and the recording rules give the exporters' series the new state."""
    store, target = served_store
    prometheus = Prometheus(tmp_path, target, (DEPLOY / "prometheus" / "recording-rules.yml",))
    instance = {"instance": target}
    task = {"connector": "sink", "task": "0"}
    try:
        write_raw(store, (b"status-task-sink-0", connect_status("RUNNING", "w1:8083", 1)))
        await prometheus_answers(prometheus, "status_task_state", {
            series(__name__="status_task_state", **instance, **task, state="RUNNING", worker_id="w1:8083"): 1.0})
        write_raw(store, (b"status-task-sink-0", connect_status("FAILED", "w2:8083", 2, "java.lang.Boom")))
        await prometheus_answers(prometheus, "status_task_state", {
            series(__name__="status_task_state", **instance, **task, state="FAILED", worker_id="w2:8083"): 1.0})
        await prometheus_answers(prometheus, 'status_tasks{state="FAILED"}', {
            series(__name__="status_tasks", **instance, state="FAILED"): 1.0})
        await prometheus_answers(prometheus, "status_task_state_changes_total", {
            series(__name__="status_task_state_changes_total", **instance, **task): 1.0})
        await prometheus_answers(prometheus, "kafka_connect_connector_tasks_state", {
            series(__name__="kafka_connect_connector_tasks_state", connector="sink", id="0", state="failed",
                   worker_id="w2:8083"): 0.0})
    finally:
        prometheus.stop()


async def prometheus_answers(prometheus: Prometheus, query: str, expected: Samples) -> None:
    """Wait until the query's result is what is expected (Prometheus scrapes every second; bounded by WAIT)."""
    await eventually_awaited(lambda: prometheus.samples(query), lambda found: found == expected, timeout=WAIT,
                             interval=0.5, what=f"{query}'s result (expected {expected})")


def test_the_repository_tracks_no_file_it_ignores() -> None:
    """Tool caches (.schemathesis/, .hypothesis/, ...) are ignored and never committed."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run([git, "ls-files", "--cached", "--ignored", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    assert tracked == ""


AGENT_JAR_IN_IMAGE = "/opt/status-store/status-store-agent.jar"


def javaagent_options(kafka_opts: str) -> tuple[PurePosixPath, dict[str, str]]:
    """The jar and the options of the -javaagent in a KAFKA_OPTS value."""
    [agent] = [word for word in kafka_opts.split() if word.startswith("-javaagent:")]
    jar, _, options = agent.removeprefix("-javaagent:").partition("=")
    return PurePosixPath(jar), dict(option.split("=", 1) for option in options.split(","))


def test_the_image_carries_the_agent_built_by_maven() -> None:
    text = (DEPLOY / "Containerfile").read_text()
    assert "RUN mvn -B -q -f agent/pom.xml verify" in text
    assert f"COPY --from=agent /build/agent/target/status-store-agent.jar {AGENT_JAR_IN_IMAGE}" in text


def test_the_worker_in_the_pod_is_started_with_the_agent_pointed_at_its_sidecar() -> None:
    docs = manifests()
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    [init] = pod["initContainers"]
    assert init["image"] == sidecar(docs)["image"]
    assert init["command"][:2] == ["cp", AGENT_JAR_IN_IMAGE]
    copied_to = PurePosixPath(init["command"][2])
    worker = next(c for c in pod["containers"] if c["name"] == "connect")
    env = {e["name"]: e for e in worker["env"]}
    jar, options = javaagent_options(env["KAFKA_OPTS"]["value"])
    mounts = {m["name"]: m for m in worker["volumeMounts"]}
    # The jar is where the init container copied it, on a volume both mount.
    init_mount = next(m for m in init["volumeMounts"] if copied_to.is_relative_to(m["mountPath"]))
    assert jar == copied_to / "status-store-agent.jar"
    assert jar.is_relative_to(mounts[init_mount["name"]]["mountPath"])
    # The sidecar on localhost, its token from the Secret the sidecar reads too.
    assert options["url"] == f"http://127.0.0.1:{sidecar(docs)['ports'][0]['containerPort']}"
    token_file = PurePosixPath(options["token.file"])
    token_mount = next(m for m in worker["volumeMounts"] if token_file.parent == PurePosixPath(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == token_mount["name"])
    sidecar_token = next(e for e in sidecar(docs)["env"] if e["name"] == "STATUS_STORE_SIDECAR_REST_TOKEN")
    assert volume["secret"]["secretName"] == sidecar_token["valueFrom"]["secretKeyRef"]["name"]
    assert volume["secret"]["items"] == [{"key": sidecar_token["valueFrom"]["secretKeyRef"]["key"],
                                         "path": token_file.name}]
    # The worker and the sidecar on the same cluster and status topic (else the agent hands nothing over).
    worker_config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "connect-worker")
    worker_properties = parse_properties(worker_config["data"]["worker.properties"])
    sidecar_config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "status-store")
    sidecar_properties = parse_properties(sidecar_config["data"]["status-store.properties"])
    for key in ("bootstrap.servers", "status.storage.topic"):
        assert worker_properties[key] == sidecar_properties[key]
    assert worker["command"][-1] == mounts["worker-config"]["mountPath"] + "/worker.properties"


def strimzi_example() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / "kubernetes" / "strimzi" / "connect-with-status-store.yaml")
                                              .read_text()) if doc]


def containerfile_stages() -> dict[str, list[str]]:
    """The Containerfile's stages by name (the last, unnamed one: ""), each its instructions, continuations joined."""
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in (DEPLOY / "Containerfile").read_text().replace("\\\n", " ").splitlines():
        if line.startswith("FROM "):
            words = line.split()
            current = stages.setdefault(words[3] if len(words) == 4 and words[2] == "AS" else "", [])
        if line and not line.startswith("#"):
            current.append(line)
    return stages


def test_the_agent_image_carries_only_the_jar() -> None:
    stages = containerfile_stages()
    assert stages["agent-image"] == ["FROM scratch AS agent-image",
                                     "COPY --from=agent /build/agent/target/status-store-agent.jar "
                                     "/status-store-agent.jar"]
    # The sidecar stays the default target: the last stage.
    assert stages[""][0].startswith("FROM python:")
    assert list(stages)[-1] == ""


def test_the_strimzi_example_attaches_the_agent_with_yaml_alone() -> None:
    docs = strimzi_example()
    connect = next(d for d in docs if d["kind"] == "KafkaConnect")
    # Strimzi's v1 API (0.49 and later; 1.x serves nothing else): the topics are fields of their own, and no image
    # of ours: the worker runs Strimzi's own.
    assert connect["apiVersion"] == "kafka.strimzi.io/v1"
    spec = connect["spec"]
    assert "image" not in spec
    assert {"replicas", "bootstrapServers", "groupId", "configStorageTopic", "offsetStorageTopic",
            "statusStorageTopic"} <= spec.keys()
    forbidden_in_v1 = {"group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic"}
    assert not forbidden_in_v1 & spec["config"].keys()
    template = spec["template"]
    env = {e["name"]: e["value"] for e in template["connectContainer"]["env"]}
    # Not KAFKA_OPTS: Strimzi's start script sets that one itself.
    assert env.keys() == {"JAVA_TOOL_OPTIONS"}
    jar, options = javaagent_options(env["JAVA_TOOL_OPTIONS"])
    mounts = {m["name"]: m for m in template["connectContainer"]["volumeMounts"]}
    volumes = {v["name"]: v for v in template["pod"]["volumes"]}
    # Strimzi refuses additional volumes mounted outside /mnt.
    assert all(PurePosixPath(m["mountPath"]).is_relative_to("/mnt") for m in mounts.values())
    # The jar is the image volume's file: the agent image's one file, under the volume's mount.
    [agent_volume] = [v for v in volumes.values() if "image" in v]
    assert agent_volume["image"]["reference"].rsplit("/", 1)[-1].startswith("status-store-agent:")
    assert mounts[agent_volume["name"]]["readOnly"] is True
    copied = containerfile_stages()["agent-image"][1].split()[-1]
    assert jar == PurePosixPath(mounts[agent_volume["name"]]["mountPath"]) / PurePosixPath(copied).relative_to("/")
    # The sidecar's Service, one instance at a time (agent/PROTOCOL.md), on the workers' cluster and status topic.
    service = next(d for d in docs if d["kind"] == "Service")
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    [port] = service["spec"]["ports"]
    assert options["url"] == f"http://{service['metadata']['name']}:{port['port']}"
    assert port["targetPort"] == container["ports"][0]["name"]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    properties = parse_properties(config_map["data"]["status-store.properties"])
    assert properties["bootstrap.servers"] == spec["bootstrapServers"]
    assert properties["status.storage.topic"] == spec["statusStorageTopic"]
    build_config({**properties, "sidecar.rest.token": "x" * 32})
    # The token file is on the Secret the sidecar reads.
    token_file = PurePosixPath(options["token.file"])
    mount = next(m for m in mounts.values() if token_file.parent == PurePosixPath(m["mountPath"]))
    secret_ref = container["env"][0]["valueFrom"]["secretKeyRef"]
    assert volumes[mount["name"]]["secret"]["secretName"] == secret_ref["name"]
    assert volumes[mount["name"]]["secret"]["items"] == [{"key": secret_ref["key"], "path": token_file.name}]
