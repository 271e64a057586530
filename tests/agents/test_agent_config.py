"""Node configuration: defaults, then a file, then --set items, then dedicated flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.config import NodeConfig, build_config, dump


def test_defaults_are_complete_and_valid() -> None:
    config = NodeConfig()
    assert config.triggers.gpu_util_pct.edges == (30.0, 80.0)
    assert config.telemetry.interval_s == 1.0 and config.triggers.heartbeat_s == 30.0
    assert config.executor.start_at == "end" and config.simulate.gpus is None


def test_file_then_sets_then_flags_win_in_that_order(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(
        "node: {node_id: from-file, cell: c1}\n"
        "triggers:\n  min_interval_s: 5\n  gpu_util_pct: {edges: [20, 90], hysteresis: 4}\n"
    )
    config = build_config(
        path,
        sets=["triggers.min_interval_s=7", "node.labels={zone: a}"],
        overrides={"node": {"node_id": "from-flag"}},
    )
    assert config.node.node_id == "from-flag" and config.node.cell == "c1"
    assert config.triggers.min_interval_s == 7
    assert config.triggers.gpu_util_pct.edges == (20.0, 90.0)
    assert config.node.labels == {"zone": "a"}


def test_the_dump_reloads_to_the_same_config(tmp_path: Path) -> None:
    config = build_config(sets=["simulate.gpus=T4x4", "simulate.faults=[gpu-fail:0@3]"])
    path = tmp_path / "dump.yaml"
    path.write_text(dump(config))
    assert build_config(path) == config


@pytest.mark.parametrize(
    "item",
    ["triggers.nonsense=1", "triggers.gpu_util_pct.edges=[90, 20]", "telemetry.interval_s=0"],
    ids=["an unknown key", "descending edges", "a zero sampling interval"],
)
def test_bad_settings_are_refused(item: str) -> None:
    with pytest.raises(ValidationError):
        build_config(sets=[item])


def test_a_set_without_equals_is_refused() -> None:
    with pytest.raises(ValueError, match=r"section\.key=value"):
        build_config(sets=["triggers.min_interval_s"])


def test_setting_one_field_of_a_nested_setting_keeps_the_other_defaults() -> None:
    config = build_config(sets=["triggers.gpu_util_pct.smoothing_s=0"])
    assert config.triggers.gpu_util_pct.smoothing_s == 0
    assert config.triggers.gpu_util_pct.edges == (30.0, 80.0)


def test_a_sandbox_section_becomes_the_executors_policy() -> None:
    config = build_config(
        sets=["executor.sandbox={user: task, allowed_commands: [python], allowed_env: [A]}"]
    )
    assert config.executor.sandbox is not None
    policy = config.executor.sandbox.policy()
    assert (policy.user, policy.allowed_commands, policy.allowed_env) == (
        "task",
        ("python",),
        ("A",),
    )
    assert NodeConfig().executor.sandbox is None


def test_every_path_setting_is_made_absolute_against_where_the_node_started() -> None:
    from agents.config import with_absolute_paths

    config = build_config(
        sets=[
            "executor.trusted_schedulers={sched: keys/sched.key, other: /etc/other.key}",
            "executor.sandbox={workdir_root: tasks}",
        ]
    )
    started_from = Path("/srv/node")
    resolved = with_absolute_paths(config, started_from)
    assert resolved.executor.state_dir == Path("/srv/node/var/hetsched-node")  # the default
    assert resolved.executor.trusted_schedulers == {
        "sched": Path("/srv/node/keys/sched.key"),
        "other": Path("/etc/other.key"),
    }
    assert resolved.executor.sandbox is not None
    assert resolved.executor.sandbox.workdir_root == Path("/srv/node/tasks")
    assert resolved.node == config.node and resolved.triggers == config.triggers


def test_the_sandbox_cannot_allow_a_variable_the_executor_sets() -> None:
    with pytest.raises(ValidationError) as caught:
        build_config(sets=["executor.sandbox={allowed_env: [EPOCHS, CUDA_VISIBLE_DEVICES]}"])
    error = str(caught.value)
    assert "allowed_env" in error and "CUDA_VISIBLE_DEVICES" in error
