"""The ACL set as data: least privilege per role, and the print command."""

from __future__ import annotations

import pytest

from schemas.topics import CATALOG, DECISIONS, INPUT_LOG, TASKS, TELEMETRY
from streams.cli import main
from streams.security.acls import Operation, Resource, bindings, may

PRINCIPALS = {
    "scheduler": ["User:scheduler"],
    "node": ["User:node-a"],
    "submitter": ["User:alice"],
    "dashboard": ["User:grafana"],
}
ROWS = bindings(PRINCIPALS)
W, R = Operation.WRITE, Operation.READ


@pytest.mark.parametrize(
    ("principal", "topic", "op", "allowed"),
    [
        ("User:scheduler", DECISIONS, W, True),
        ("User:node-a", DECISIONS, W, False),
        ("User:alice", DECISIONS, W, False),
        ("User:alice", INPUT_LOG, W, False),
        ("User:node-a", INPUT_LOG, W, False),
        ("User:alice", TASKS, W, True),
        ("User:alice", TASKS, R, False),
        ("User:node-a", TELEMETRY, W, True),
        ("User:scheduler", TELEMETRY, W, False),
        ("User:grafana", DECISIONS, R, True),
    ],
    ids=[
        "only the scheduler writes decisions",
        "a node cannot write decisions",
        "a submitter cannot write decisions",
        "a submitter cannot write the input log",
        "a node cannot write the input log",
        "a submitter writes tasks",
        "a submitter does not read tasks",
        "a node writes telemetry",
        "the scheduler does not forge telemetry",
        "a dashboard reads decisions",
    ],
)
def test_least_privilege(principal, topic, op, allowed) -> None:
    assert may(ROWS, principal, Resource.TOPIC, topic, op) is allowed


def test_dashboards_never_write_anything() -> None:
    assert not [r for r in ROWS if r.principal == "User:grafana" and r.operation != R
                and r.operation != Operation.DESCRIBE]
    assert all(may(ROWS, "User:grafana", Resource.TOPIC, s.name, R) for s in CATALOG)


def test_the_scheduler_owns_its_faust_internals_by_prefix() -> None:
    changelog = "hetsched-scheduler-cells-changelog"
    assert may(ROWS, "User:scheduler", Resource.TOPIC, changelog, Operation.CREATE)
    assert may(ROWS, "User:scheduler", Resource.TRANSACTIONAL_ID, "hetsched-scheduler-0", W)
    assert not may(ROWS, "User:node-a", Resource.TOPIC, changelog, W)


def test_principals_must_be_kafka_user_principals() -> None:
    with pytest.raises(ValueError, match="User:"):
        bindings({"node": ["node-a"]})


def test_acl_print_shows_the_table_and_the_bindings(tmp_path, capsys) -> None:
    assert main(["acl", "print"]) == 0
    table = capsys.readouterr().out
    assert "| submitter | TOPIC | `hetsched.tasks` | WRITE, DESCRIBE |" in table
    principal_map = tmp_path / "principals.yaml"
    principal_map.write_text("roles:\n  submitter: ['User:alice']\n")
    assert main(["acl", "print", "--principal-map", str(principal_map)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "User:alice\tTOPIC\tLITERAL:hetsched.tasks\tWRITE\tALLOW" in lines


def test_a_principal_map_that_cannot_be_used_is_one_line_naming_it(tmp_path, capsys) -> None:
    path = tmp_path / "principals.yaml"
    cases = {
        None: "No such file or directory",
        "roles: [1\n": "not YAML: expected ',' or ']', but got '<stream end>' at line 2",
        "- User:alice\n": "expected a 'roles' mapping",
        "roles:\n  submitter: ['alice']\n": "User:",
    }
    for text, message in cases.items():
        if text is not None:
            path.write_text(text)
        assert main(["acl", "print", "--principal-map", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"hetsched acl: --principal-map {path}: ") and message in err, err
        assert err.count("\n") == 1
    assert main(["acl", "apply"]) == 2
    assert capsys.readouterr().err == "hetsched acl: apply needs --principal-map FILE\n"
