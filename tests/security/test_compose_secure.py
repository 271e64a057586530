"""The secured docker-compose variant: structure only (Docker is not needed to run it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "docker-compose.secure.yml"
PLAIN = COMPOSE.with_name("docker-compose.yml")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_every_broker_listener_is_sasl_ssl(compose) -> None:
    env = compose["services"]["kafka"]["environment"]
    protocol_map = env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    protocols = dict(item.split(":") for item in protocol_map)
    listeners = [item.split("://")[0] for item in env["KAFKA_LISTENERS"].split(",")]
    assert set(listeners) == set(protocols)
    assert set(protocols.values()) == {"SASL_SSL"}
    assert "SCRAM-SHA-512" in env["KAFKA_SASL_ENABLED_MECHANISMS"]


def test_the_authorizer_denies_by_default(compose) -> None:
    env = compose["services"]["kafka"]["environment"]
    assert env["KAFKA_AUTHORIZER_CLASS_NAME"].endswith("StandardAuthorizer")
    assert str(env["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"]).lower() == "false"
    assert env["KAFKA_SUPER_USERS"] == "User:admin"


def test_secrets_are_files_never_environment_literals(compose) -> None:
    declared = compose["secrets"]
    assert all(set(spec) == {"file"} and spec["file"].startswith("./secrets/")
               for spec in declared.values())
    for name, service in compose["services"].items():
        env = service.get("environment") or {}
        for key, value in env.items():
            if any(word in key for word in ("PASSWORD", "SECRET", "JAAS_CONFIG")):
                assert key.endswith("_FILE") and str(value).startswith("/run/secrets/"), (
                    f"{name}: {key} must point at a docker secret file"
                )
        if env.get("KAFKA_SASL_USERNAME"):
            assert env["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
            assert env["KAFKA_SSL_CAFILE"].startswith("/run/secrets/")


def test_the_secured_variant_keeps_the_plain_files_services(compose) -> None:
    plain = yaml.safe_load(PLAIN.read_text())
    assert set(plain["services"]) <= set(compose["services"])


def test_acls_are_applied_before_the_scheduler_starts(compose) -> None:
    scheduler = compose["services"]["scheduler"]
    assert scheduler["depends_on"]["hetsched-acl"]["condition"] == "service_completed_successfully"
    assert "hetsched acl apply" in " ".join(compose["services"]["hetsched-acl"]["command"])
