"""No secret in logs, error messages, command lines or client output.

Runs last in the package (file name) so that the broker log it scans holds the
whole session: SCRAM and PLAIN logins, refused produces and reads, a wrong
password, the ACL apply command and the dead letters of forged submissions.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError

from schemas.kafka import security_settings
from schemas.topics import DECISIONS

pytestmark = pytest.mark.integration
REPO_ROOT = Path(__file__).resolve().parents[2]


def _all_command_lines() -> str:
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return "\n".join(lines)


async def test_no_secret_in_logs_errors_or_process_lists(secure_cluster, caplog) -> None:
    cluster = secure_cluster
    caplog.set_level(logging.DEBUG)
    texts: dict[str, str] = {}

    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, **cluster.kwargs_for("alice"))
    await producer.start()
    try:
        with pytest.raises(TopicAuthorizationFailedError) as denied:
            await producer.send_and_wait(DECISIONS, b"x", key=b"k")
    finally:
        await producer.stop()
    texts["denied error"] = f"{denied.value!r} {denied.value}"
    texts["settings repr"] = repr(security_settings(cluster.env_for("alice")))

    tool = subprocess.run(
        [sys.executable, "-m", "schemas.admin", "--bootstrap", cluster.bootstrap],
        env=cluster.env_for("scheduler"), capture_output=True, text=True, cwd=REPO_ROOT,
        check=False,
    )
    assert tool.returncode == 0, tool.stderr
    texts["admin tool output"] = tool.stdout + tool.stderr
    printed = subprocess.run(
        [sys.executable, "-m", "streams.cli", "acl", "print", "--principal-map",
         str(cluster.security_config)],
        capture_output=True, text=True, cwd=REPO_ROOT, check=True,
    )
    texts["acl print"] = printed.stdout + printed.stderr
    texts["client logs"] = caplog.text
    texts["earlier outputs"] = "\n".join(cluster.outputs)
    texts["broker log"] = (cluster.home / "server.log").read_text(errors="replace")
    texts["process command lines"] = _all_command_lines()

    assert "SASL" in texts["broker log"] or "sasl" in texts["broker log"]
    assert not (cluster.home / ".format.args").exists(), "the SCRAM argfile must be deleted"
    leaks = [
        (where, user)
        for where, text in texts.items()
        for user, secret in [*cluster.passwords.items(),
                             *((u, k.decode()) for u, k in cluster.signing_keys.items())]
        if secret in text
    ]
    assert not leaks, f"secrets found (where, whose): {leaks}"
