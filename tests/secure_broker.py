"""The secured Kafka broker of the security and attack tests (TLS + SASL/SCRAM, ACLs).

TLS with a CA and broker certificate generated now (never checked in),
SASL/SCRAM-SHA-512 users per role created when the storage is formatted, one
SASL/PLAIN user, the StandardAuthorizer with default deny, and the project's
ACL set applied with ``hetsched acl apply`` itself. Everything lives in a
temporary folder; the broker is stopped at the end of the session.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from schemas.admin import ensure_topics
from schemas.kafka import security_settings
from schemas.signing import Signer
from schemas.topics import catalog_spec, for_deployment

REPO_ROOT = Path(__file__).resolve().parents[1]  # tests/ is one level below the root
SECURE_SCRIPT = REPO_ROOT / "docker" / "kafka" / "secure.sh"

# user -> (role, tenant or node id)
SCRAM_USERS: dict[str, tuple[str, str | None]] = {
    "scheduler": ("scheduler", None),
    "node-a": ("node", "node-a"),
    "node-b": ("node", "node-b"),
    "alice": ("submitter", "vision"),
    "bob": ("submitter", "nlp"),
    "grafana": ("dashboard", None),
}
PLAIN_USERS: dict[str, tuple[str, str | None]] = {"grafana-plain": ("dashboard", None)}


def _free_port_pair() -> int:
    """A port p with p and p+1 free (client and controller listeners)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s2:
                s2.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        if port + 1 < 65535:
            return port
    raise RuntimeError("no free port pair")


@dataclass
class SecureCluster:
    """Handles to the secured broker: addresses, files, secrets, client settings."""

    bootstrap: str
    home: Path
    cafile: Path
    passwords: dict[str, str]
    password_files: dict[str, Path]
    signing_keys: dict[str, bytes]
    signing_key_files: dict[str, Path]
    security_config: Path
    script_env: dict[str, str]
    partitions: int = 2
    """The deployment's partition count (fast start): every catalog topic but the
    dead-letter topic, whose one partition is fixed, is created with it."""
    outputs: list[str] = field(default_factory=list)
    """Text printed by commands run against the cluster, for the secret scan."""

    def partitions_of(self, topic: str) -> int:
        """How many partitions ``topic`` (a catalog topic, or one sized like them) has
        on this cluster."""
        spec = catalog_spec(topic)
        return self.partitions if spec is None else for_deployment(
            [spec], self.partitions)[0].partitions

    def env_for(self, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """Environment of a process authenticating as ``user`` (password via file)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        env.update(
            KAFKA_BOOTSTRAP=self.bootstrap,
            KAFKA_SECURITY_PROTOCOL="SASL_SSL",
            KAFKA_SSL_CAFILE=str(self.cafile),
            KAFKA_SASL_MECHANISM=mechanism,
            KAFKA_SASL_USERNAME=user,
            KAFKA_SASL_PASSWORD_FILE=str(self.password_files[user]),
        )
        if user in self.signing_key_files:
            env["HETSCHED_SIGNING_KEY_FILE"] = str(self.signing_key_files[user])
        return env

    def kwargs_for(self, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
        """aiokafka security arguments for ``user``, through the project's own settings."""
        return security_settings(self.env_for(user, mechanism)).aiokafka_kwargs()

    def signer(self, user: str) -> Signer:
        return Signer(user, self.signing_keys[user])

    def all_secrets(self) -> list[str]:
        return [*self.passwords.values(), *(k.decode() for k in self.signing_keys.values())]


def _write_secret(path: Path, text: str) -> None:
    path.write_text(text + "\n")
    path.chmod(0o600)


@pytest.fixture(scope="session")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    home = tmp_path_factory.mktemp("kafka-secure")
    secrets_dir = home / "secrets"
    secrets_dir.mkdir(mode=0o700)
    client_dir = home / "client"
    client_dir.mkdir(mode=0o700)
    passwords: dict[str, str] = {}
    password_files: dict[str, Path] = {}
    kinds = [*((u, "scram") for u in SCRAM_USERS), *((u, "plain") for u in PLAIN_USERS)]
    for user, suffix in kinds:
        passwords[user] = secrets.token_urlsafe(18)
        _write_secret(secrets_dir / f"{user}.{suffix}", passwords[user])
        password_files[user] = client_dir / f"{user}.password"
        _write_secret(password_files[user], passwords[user])
    passwords["admin"] = secrets.token_urlsafe(18)
    _write_secret(secrets_dir / "admin.password", passwords["admin"])
    password_files["admin"] = secrets_dir / "admin.password"

    keys_dir = home / "keys"
    keys_dir.mkdir(mode=0o700)
    signing_keys: dict[str, bytes] = {}
    signing_key_files: dict[str, Path] = {}
    for user, (role, _) in SCRAM_USERS.items():
        if role in ("node", "submitter"):
            signing_keys[user] = secrets.token_hex(32).encode()
            signing_key_files[user] = keys_dir / f"{user}.key"
            _write_secret(signing_key_files[user], signing_keys[user].decode())

    all_users = {**SCRAM_USERS, **PLAIN_USERS}
    roles: dict[str, list[str]] = {}
    for user, (role, _) in all_users.items():
        roles.setdefault(role, []).append(f"User:{user}")
    config = {
        "roles": roles,
        "tenants": {u: t for u, (r, t) in SCRAM_USERS.items() if r == "submitter"},
        "nodes": {u: [n] for u, (r, n) in SCRAM_USERS.items() if r == "node"},
        "signing_keys": {u: f"keys/{u}.key" for u in signing_keys},
    }
    security_config = home / "security.yaml"
    security_config.write_text(yaml.safe_dump(config))

    port = _free_port_pair()
    script_env = dict(os.environ)
    script_env.pop("KAFKA_BOOTSTRAP", None)
    script_env.update(
        HETSCHED_KAFKA_HOME=str(home), HETSCHED_KAFKA_PORT=str(port),
        HETSCHED_KAFKA_HEAP="-Xms256m -Xmx768m",
    )
    subprocess.run([str(SECURE_SCRIPT), "start"], env=script_env, check=True)
    cluster = SecureCluster(
        bootstrap=f"127.0.0.1:{port}", home=home, cafile=home / "tls" / "ca.pem",
        passwords=passwords, password_files=password_files, signing_keys=signing_keys,
        signing_key_files=signing_key_files, security_config=security_config,
        script_env=script_env,
    )
    try:
        admin_kwargs = cluster.kwargs_for("admin")
        asyncio.run(
            ensure_topics(
                cluster.bootstrap, partitions=cluster.partitions, client_kwargs=admin_kwargs
            )
        )
        applied = subprocess.run(
            [sys.executable, "-m", "streams.cli", "acl", "apply", "--principal-map",
             str(security_config)],
            env=cluster.env_for("admin"), capture_output=True, text=True, cwd=REPO_ROOT,
            check=False,
        )
        cluster.outputs.append(applied.stdout + applied.stderr)
        assert applied.returncode == 0, applied.stderr
        yield cluster
    finally:
        subprocess.run([str(SECURE_SCRIPT), "stop"], env=script_env, check=False)
