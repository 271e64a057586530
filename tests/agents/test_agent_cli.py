"""The ``hetsched-node`` command line: config printing, clear refusals, node sampling."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agents.cli import COMMANDS, build_parser
from agents.commands.sim_cluster import sample_nodes
from agents.telemetry.traces import traces_dir


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agents.cli", *argv], capture_output=True, text=True, check=False
    )


def test_every_command_module_has_the_cli_contract() -> None:
    parser = build_parser()
    assert {"agent", "executor", "run", "sim-cluster", "config", "health"} <= set(COMMANDS)
    assert parser.parse_args(["run", "--simulate", "T4x2"]).simulate == "T4x2"


def test_config_prints_the_effective_configuration_as_reloadable_yaml() -> None:
    proc = _cli("config", "--simulate", "A100x8", "--set", "triggers.min_interval_s=5")
    assert proc.returncode == 0, proc.stderr
    data = yaml.safe_load(proc.stdout)
    assert data["simulate"]["gpus"] == "A100x8" and data["triggers"]["min_interval_s"] == 5
    assert data["triggers"]["gpu_util_pct"]["edges"] == [30.0, 80.0]


def test_a_bad_setting_is_refused_with_the_reason() -> None:
    proc = _cli("config", "--set", "telemetry.interval_s=-1")
    assert proc.returncode == 2 and "interval_s" in proc.stderr


@pytest.mark.parametrize(("argv", "expected"), [
    (("agent", "--simulate", "A100x2", "--set", "foo=bar"),
     "hetsched-node agent: bad configuration: foo: value 'bar': Extra inputs are not permitted"),
    (("config", "--set", "triggers.heartbeat_s=-5", "--set", "telemetry.interval_s=0"),
     "hetsched-node config: bad configuration: telemetry.interval_s: value 0: Input should be "
     "greater than 0; triggers.heartbeat_s: value -5: Input should be greater than 0"),
    (("agent", "--simulate", "A100x2", "--set", "triggers.heartbeat_s=[1"),
     "hetsched-node agent: bad configuration: --set 'triggers.heartbeat_s=[1': the value is "
     "not YAML: expected ',' or ']', but got '<stream end>' at line 1, column 3"),
    (("agent", "--simulate", "A100x2", "--fault", "garbage"),
     "hetsched-node: bad fault 'garbage': expected gpu-fail:IDX@T"),
    (("sim-cluster", "--nodes", "-1"),
     "hetsched-node: --nodes -1: must be 0 (the whole list) or more"),
], ids=["an unknown setting", "every bad value, each named", "a --set value that is not YAML",
        "a fault spec", "a negative node count (it meant the whole list)"])
def test_bad_input_is_one_line_naming_the_setting_and_value(argv: tuple[str, ...],
                                                           expected: str) -> None:
    proc = _cli(*argv)
    assert proc.returncode == 2
    assert proc.stderr.startswith(expected) and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize(("argv", "expected"), [
    (("--metrics-port", "99999"),
     "argument --metrics-port: 99999: must be a TCP port, or 0 for none"),
    (("--metrics-port", "nine"), "argument --metrics-port: 'nine': not a port number"),
    (("--log-level", "LOUD"),
     "argument --log-level: 'LOUD': not a log level (DEBUG, INFO, WARNING, ERROR, CRITICAL)"),
], ids=["a port past the last one", "a port that is no number", "an unknown log level"])
def test_a_bad_flag_is_refused_before_the_node_starts(argv: tuple[str, ...],
                                                      expected: str) -> None:
    """Both were tracebacks once the node had started (the metrics server's bind,
    ``logging``)."""
    proc = _cli("agent", "--simulate", "A100x2", "--bootstrap", "127.0.0.1:1", *argv)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == f"hetsched-node agent: error: {expected}"
    assert "Traceback" not in proc.stderr


def test_the_log_level_is_any_case() -> None:
    assert build_parser().parse_args(["run", "--log-level", "debug"]).log_level == "DEBUG"


def test_a_config_file_that_is_not_yaml_is_named_with_the_place(tmp_path: Path) -> None:
    bad = tmp_path / "node.yaml"
    bad.write_text("node:\n  cell: [a\n")
    proc = _cli("executor", "--config", str(bad))
    assert proc.returncode == 2
    assert proc.stderr == (f"hetsched-node executor: bad configuration: {bad}: not YAML/JSON: "
                           "expected ',' or ']', but got '<stream end>' at line 3, column 1\n")


def test_an_unknown_simulated_model_is_refused_with_the_catalog() -> None:
    proc = _cli("agent", "--simulate", "Z9000x2")
    assert proc.returncode == 2 and "known:" in proc.stderr


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="has NVML")
def test_the_agent_without_nvml_says_so_and_exits_non_zero() -> None:
    proc = _cli("agent", "--node-id", "n1")
    assert proc.returncode == 3
    assert "NVML is not available" in proc.stderr and "--simulate" in proc.stderr


def test_sim_cluster_samples_openb_nodes_reproducibly() -> None:
    try:
        path = traces_dir() / "openb" / "openb_node_list_gpu_node.csv"
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    first = sample_nodes(Path(path), 10, seed=1)
    assert len(first) == 10 and first == sample_nodes(Path(path), 10, seed=1)
    assert first != sample_nodes(Path(path), 10, seed=2)
    assert all(int(r["gpu"]) > 0 and r["model"] for r in first)
    assert len(sample_nodes(Path(path), 0, seed=0)) == 1213


@pytest.mark.skipif(os.geteuid() != 0, reason="executor.run_as applies to a node running as root")
@pytest.mark.parametrize("command", ["run", "executor", "sim-cluster"])
def test_a_node_whose_task_account_does_not_exist_refuses_to_start(command: str) -> None:
    """No account is created silently, and no task finds out later: the node stops at
    start with one line naming the setting and its value (before it contacts Kafka)."""
    proc = _cli(command, "--simulate", "T4x1", "--bootstrap", "127.0.0.1:1",
                "--set", "executor.run_as=no-such-task-user")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(
        "hetsched-node: executor.run_as: user 'no-such-task-user' does not exist on this machine"
    ), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
