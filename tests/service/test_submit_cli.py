"""``hetsched submit`` refuses invalid specs with the field and the reason, sending nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streams.commands.submit import load_specs, validate

GOOD = {
    "task_id": "job-1", "tenant": "team-a",
    "resources": {"gpu_count": 1, "gpu_share_milli": 500},
    "executor": {"kind": "process", "argv": ["python", "train.py"]},
}


@pytest.mark.parametrize(("spec", "field", "reason"), [
    ({**GOOD, "resources": {"gpu_count": 2, "gpu_share_milli": 500}}, "resources",
     "gpu_share_milli < 1000 requires gpu_count == 1"),
    ({**GOOD, "resources": {"gpu_count": "2"}}, "resources.gpu_count", "valid integer"),
    ({**GOOD, "executor": {"kind": "process"}}, "executor", "argv is required"),
    ({**GOOD, "colour": "blue"}, "colour", "Extra inputs are not permitted"),
    ({k: v for k, v in GOOD.items() if k != "tenant"}, "tenant", "Field required"),
    ({**GOOD, "resources": {"gpu_count": 1, "gpu_models": ["T4", "H999"]}},
     "resources.gpu_models", "unknown GPU model 'H999' (known: A10, A100, "),
], ids=["a fractional share needs one GPU", "a count must be an integer, not a string",
        "a process needs a command line", "unknown fields are refused",
        "the tenant is required", "a GPU model the catalog lacks is named with the known ones"])
def test_an_invalid_spec_is_reported_with_its_field_and_reason(tmp_path: Path, spec, field,
                                                                reason):
    path = tmp_path / "tasks.yaml"
    import yaml
    path.write_text(yaml.safe_dump([GOOD, spec]))
    _, errors = validate(path, load_specs(path))
    assert len(errors) >= 1
    assert errors[0].startswith(f"{path}: task 2 (task_id ")
    assert f"field {field}:" in errors[0] and reason in errors[0]


def test_a_task_id_used_twice_in_one_file_is_refused_before_sending(tmp_path: Path):
    import yaml
    path = tmp_path / "tasks.yaml"
    path.write_text(yaml.safe_dump([GOOD, {**GOOD, "tenant": "team-b"}]))
    _, errors = validate(path, load_specs(path))
    assert errors == [f'{path}: task 2 (task_id job-1): field task_id: value "job-1": also the '
                      "id of task 1 of this file"]


def test_json_and_single_specs_are_accepted(tmp_path: Path):
    import json
    path = tmp_path / "one.json"
    path.write_text(json.dumps(GOOD))
    payloads, errors = validate(path, load_specs(path))
    assert errors == [] and payloads[0].task_id == "job-1"


def test_the_command_exits_2_and_sends_nothing_on_errors(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("task_id: x\ntenant: t\nresources: {gpu_count: -1}\n"
                    "executor: {kind: simulated}\n")
    run = subprocess.run([sys.executable, "-m", "streams.cli", "submit", str(path)],
                         capture_output=True, text=True, env={"KAFKA_BOOTSTRAP": "127.0.0.1:1",
                                                              "PATH": "/usr/bin:/bin"},
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 2, run.stderr
    assert "field resources.gpu_count: value -1" in run.stderr
    assert "nothing sent" in run.stderr


def test_a_spec_file_that_is_not_yaml_is_named_with_the_place(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("- task_id: [x\n")
    with pytest.raises(ValueError) as raised:
        load_specs(path)
    assert str(raised.value) == (f"{path}: not YAML/JSON: expected ',' or ']', but got "
                                 "'<stream end>' at line 2, column 1")


def _docs_example() -> dict:
    """The job.yaml of docs/service.md's "Submit a task and watch it placed"."""
    import re

    import yaml
    text = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text()
    section = text[text.index("## Submit a task and watch it placed"):]
    found = re.search(r"cat > job\.yaml <<'YAML'\n(.*?)\nYAML\n", section, re.S)
    assert found, "docs/service.md has no job.yaml example"
    return yaml.safe_load(found.group(1))


def test_the_docs_submit_example_can_run_on_the_demos_nodes(tmp_path: Path) -> None:
    """It asked for an A100, which no node of `hetsched-node sim-cluster` (the demo's
    nodes) has, and ran train.py, which does not exist: it could never succeed."""
    import shutil

    from agents.commands.sim_cluster import sample_nodes
    from agents.telemetry.traces import traces_dir

    spec = _docs_example()
    path = tmp_path / "job.yaml"
    import yaml
    path.write_text(yaml.safe_dump(spec))
    (payload,), errors = validate(path, load_specs(path))
    assert errors == []
    nodes = sample_nodes(traces_dir() / "openb" / "openb_node_list_gpu_node.csv", 20, 0)
    wanted = payload.resources
    assert any((not wanted.gpu_models or n["model"] in wanted.gpu_models)
               and int(n["gpu"]) >= wanted.gpu_count for n in nodes), wanted
    argv = payload.executor.argv
    assert shutil.which(argv[0]), argv
    assert not [a for a in argv[1:] if a.endswith((".py", ".sh"))], argv  # no script to miss


def test_submit_help_says_what_each_exit_status_means() -> None:
    run = subprocess.run([sys.executable, "-m", "streams.cli", "submit", "--help"],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    text = " ".join(run.stdout.split())
    for status in ("0 every task sent (with --wait: placed)", "1 a task was refused",
                   "2 invalid file or spec, nothing sent",
                   "3 with --wait: a task was not placed within --timeout"):
        assert status in text, text
