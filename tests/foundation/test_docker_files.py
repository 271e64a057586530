"""Structural checks of docker/: no Docker engine runs here, so a broken file must fail CI.

The compose file is parsed and checked for what `docker compose up` relies on:
service names, images or builds, commands that our CLIs accept, start order,
and Kafka listener settings that agree with each other and with the clients.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from agents.cli import build_parser as node_parser
from streams.cli import build_parser as scheduler_parser

DOCKER = Path(__file__).resolve().parents[2] / "docker"
COMPOSE = DOCKER / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _listeners(value: str) -> dict[str, str]:
    """'NAME://host:port,...' -> {NAME: 'host:port'}."""
    out = {}
    for item in value.split(","):
        name, _, address = item.partition("://")
        out[name] = address
    return out


def test_compose_has_kafka_and_a_scheduler(compose: dict) -> None:
    services = compose["services"]
    assert "kafka" in services
    assert "scheduler" in services
    for name, service in services.items():
        assert "image" in service or "build" in service, f"{name} has neither image nor build"


def test_kafka_is_the_official_image_in_kraft_mode(compose: dict) -> None:
    kafka = compose["services"]["kafka"]
    assert re.fullmatch(r"apache/kafka:3\.9\.\d+", kafka["image"])
    env = _env(kafka)
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    listeners = _listeners(env["KAFKA_LISTENERS"])
    advertised = _listeners(env["KAFKA_ADVERTISED_LISTENERS"])
    protocol_map = dict(
        p.split(":") for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    )
    controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert controller in listeners and controller not in advertised
    assert set(listeners) <= set(protocol_map), "every listener needs a security protocol"
    assert set(advertised) <= set(listeners), "advertised listeners must be declared listeners"
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] in advertised
    node_id, _, voter = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].partition("@")
    assert node_id == str(env["KAFKA_NODE_ID"])
    assert voter.rsplit(":", 1)[1] == listeners[controller].rsplit(":", 1)[1]
    # One broker: internal topics must be single-replica or exactly-once cannot start.
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "1"
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"
    assert "healthcheck" in kafka


def test_clients_use_the_advertised_listener_and_wait_for_kafka(compose: dict) -> None:
    kafka_env = _env(compose["services"]["kafka"])
    internal = _listeners(kafka_env["KAFKA_ADVERTISED_LISTENERS"])[
        kafka_env["KAFKA_INTER_BROKER_LISTENER_NAME"]
    ]
    for name, service in compose["services"].items():
        if name == "kafka" or "command" not in service:
            continue
        assert _env(service).get("KAFKA_BOOTSTRAP") == internal, name
        assert service["depends_on"]["kafka"]["condition"] == "service_healthy", name


def test_service_commands_are_accepted_by_our_clis(compose: dict) -> None:
    parsers = {"hetsched": scheduler_parser(), "hetsched-node": node_parser()}
    seen = 0
    for name, service in compose["services"].items():
        command = service.get("command")
        if command is None:
            continue
        argv = command.split() if isinstance(command, str) else list(command)
        assert argv[0] in parsers, f"{name}: unknown program {argv[0]}"
        try:
            parsers[argv[0]].parse_args(argv[1:])
        except SystemExit as exc:
            pytest.fail(f"{name}: {' '.join(argv)} is rejected by {argv[0]} (exit {exc.code})")
        seen += 1
    assert seen >= 1


def test_builds_point_at_the_dockerfile_and_it_installs_the_project(compose: dict) -> None:
    dockerfile = DOCKER / "Dockerfile"
    text = dockerfile.read_text()
    assert re.search(r"^FROM python:3\.1[1-9]", text, re.M)
    assert "pip install ." in text
    for name in ("schemas", "streams", "agents"):
        assert f"COPY {name} " in text
    # The compiled core: built into a wheel in its own stage, installed with the project
    # (hetsched depends on hetsched-core, which only native/ provides).
    assert re.search(r"^FROM \S+ AS core$", text, re.M)
    assert "COPY native ./native" in text
    assert re.search(r"^RUN pip wheel .*--wheel-dir /wheels \./native$", text, re.M)
    assert "COPY --from=core /wheels /wheels" in text
    assert "pip install . /wheels/*.whl" in text
    for name, service in compose["services"].items():
        build = service.get("build")
        if build is None:
            continue
        context = (COMPOSE.parent / build["context"]).resolve()
        assert (context / build["dockerfile"]).resolve() == dockerfile.resolve(), name
        assert (context / "pyproject.toml").exists(), name


def test_prometheus_scrapes_the_worker_and_the_nodes_on_their_ports(compose: dict) -> None:
    services = compose["services"]
    config = yaml.safe_load((DOCKER / "prometheus.yml").read_text())
    targets = {t for job in config["scrape_configs"] for sc in job["static_configs"]
               for t in sc["targets"]}
    assert targets == {"scheduler:6066", "nodes:9101"}
    assert _env(services["scheduler"])["HETSCHED_WEB_PORT"] == "6066"
    assert "9101" in services["nodes"]["command"]
    assert _env(services["nodes"])["HETSCHED_METRICS_HOST"] == "0.0.0.0"
    mounts = services["prometheus"]["volumes"]
    assert any(m.startswith("./prometheus.yml:") for m in mounts)


def test_grafana_dashboard_queries_only_series_the_processes_export(compose: dict) -> None:
    import json

    dashboard = json.loads((DOCKER / "grafana" / "dashboards" / "hetsched.json").read_text())
    exported = set(re.findall(r'"(hetsched_[a-z_]+)"', "".join(
        p.read_text() for p in (DOCKER.parent / "streams" / "metrics.py",
                                DOCKER.parent / "agents" / "metrics.py"))))
    used = {m for panel in dashboard["panels"] for t in panel["targets"]
            for m in re.findall(r"hetsched_[a-z_]+", t["expr"])}
    suffixes = ("_bucket", "_count", "_sum", "_total")
    base = {next((m.removesuffix(s) for s in suffixes if m.endswith(s)), m) for m in used}
    known = exported | {e.removesuffix("_total") for e in exported}
    assert base <= known, base - known
    provisioning = DOCKER / "grafana" / "provisioning"
    assert (provisioning / "datasources" / "prometheus.yml").exists()
    assert (provisioning / "dashboards" / "hetsched.yml").exists()
    assert "grafana" in compose["services"] and "prometheus" in compose["services"]


def test_scheduler_and_nodes_healthchecks_ask_their_own_health_endpoints(compose: dict) -> None:
    """The compose healthchecks read the processes' /health (503 while Kafka is away)."""
    services = compose["services"]
    worker_check = services["scheduler"]["healthcheck"]["test"]
    port = _env(services["scheduler"])["HETSCHED_WEB_PORT"]
    assert worker_check[0] == "CMD" and f"127.0.0.1:{port}/health" in " ".join(worker_check)
    node_check = services["nodes"]["healthcheck"]["test"]
    assert node_check[:2] == ["CMD", "hetsched-node"]
    args = node_parser().parse_args(node_check[2:])
    metrics_port = services["nodes"]["command"][services["nodes"]["command"].index(
        "--metrics-port") + 1]
    assert args.url == f"http://127.0.0.1:{metrics_port}"
