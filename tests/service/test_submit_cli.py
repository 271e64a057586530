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
