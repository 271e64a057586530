"""``hetsched simulate`` end to end on a small trace sample (seconds), and bad input errors."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pytest

from streams.commands import simulate
from streams.sim.traces import traces_dir

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
TASK_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"


def sample(tmp_path: Path) -> tuple[Path, Path]:
    """A slice of the openb trace when present, else a synthetic one of the same format."""
    openb = traces_dir() / "openb"
    nodes, tasks = tmp_path / "nodes.csv", tmp_path / "tasks.csv"
    if (openb / "openb_pod_list_default.csv").exists():
        node_lines = (openb / "openb_node_list_gpu_node.csv").read_text().splitlines()
        nodes.write_text("\n".join(node_lines[:1] + node_lines[1::20]) + "\n")
        task_lines = (openb / "openb_pod_list_default.csv").read_text().splitlines()
        tasks.write_text("\n".join(task_lines[:1] + task_lines[1::20]) + "\n")
    else:
        nodes.write_text(NODE_HEADER + "".join(
            f"node-{i:03d},{32000 * (1 + i % 3)},262144,{(1, 2, 4, 8)[i % 4]},"
            f"{('T4', 'G2', 'V100M16')[i % 3]}\n" for i in range(40)))
        tasks.write_text(TASK_HEADER + "".join(
            f"task-{i:04d},{1000 * (1 + i % 8)},2048,{(0, 1, 1, 1, 2)[i % 5]},"
            f"{(1000, 500, 250, 1000, 1000)[i % 5]},{'T4' if i % 11 == 0 else ''}\n"
            for i in range(400)))
    return nodes, tasks


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    return simulate.run(parser.parse_args(argv))


def test_simulate_writes_curve_plot_table_and_replayable_decisions(tmp_path):
    nodes, tasks = sample(tmp_path)
    out = tmp_path / "out"
    rc = run_cli(["--nodes", str(nodes), "--tasks", str(tasks), "--policies", "fgd,bestfit",
                  "--seeds", "42-43", "--tune", "1.3", "--out", str(out), "--decisions",
                  "--no-progress"])
    assert rc == 0
    with (out / "curve.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["policy", "seed", "arrived_pct", "alloc_pct", "frag_ratio_pct"]
    assert {(r["policy"], r["seed"]) for r in rows} == {("fgd", "42"), ("fgd", "43"),
                                                         ("bestfit", "42"), ("bestfit", "43")}
    assert all(0 <= float(r["alloc_pct"]) <= 100 for r in rows)
    assert (out / "allocation.png").read_bytes()[:4] == b"\x89PNG"
    assert "| fgd |" in (out / "summary.md").read_text()
    # Replay the decision log independently: capacities hold, arrivals are in order.
    node_rows = {r["sn"]: r for r in csv.DictReader(nodes.open())}
    task_rows = {r["name"]: r for r in csv.DictReader(tasks.open())}
    free = {n: [1000] * int(r["gpu"]) for n, r in node_rows.items()}
    cpu = {n: int(r["cpu_milli"]) for n, r in node_rows.items()}
    lines = (out / "decisions-fgd-42.jsonl").read_text().splitlines()
    assert lines
    for i, line in enumerate(lines):
        d = json.loads(line)
        assert d["index"] == i and d["task"] in task_rows
        if d["node"] is None:
            assert d["gpus"] == []
            continue
        t = task_rows[d["task"]]
        assert len(d["gpus"]) == int(t["num_gpu"])
        cpu[d["node"]] -= int(t["cpu_milli"])
        assert cpu[d["node"]] >= 0
        for g in d["gpus"]:
            free[d["node"]][g["gpu"]] -= g["milli"]
            assert free[d["node"]][g["gpu"]] >= 0


@pytest.mark.parametrize(
    ("which", "content", "expected"),
    [
        ("tasks", TASK_HEADER + "t1,100,10,1,500,\nt2,abc,10,0,0,\n",
         "tasks.csv:3: field 'cpu_milli'"),
        ("tasks", "name,cpu_milli\nt1,100\n", "tasks.csv:1: header lacks field(s)"),
        ("nodes", NODE_HEADER + "n1,1000,100,-2,T4\n", "nodes.csv:2: field 'gpu'"),
        ("nodes", NODE_HEADER + "n1,1000,100,2,\n", "nodes.csv:2: field 'model'"),
    ],
    ids=["a non-integer cpu is named with its line", "a missing column is named",
         "a negative GPU count is named", "GPUs without a model are named"],
)
def test_bad_input_files_fail_with_file_line_and_field(tmp_path, capsys, which, content, expected):
    nodes, tasks = sample(tmp_path)
    (nodes if which == "nodes" else tasks).write_text(content)
    rc = run_cli(["--nodes", str(nodes), "--tasks", str(tasks), "--out", str(tmp_path / "o"),
                  "--no-progress"])
    assert rc == 2
    assert expected in capsys.readouterr().err


def test_seed_and_policy_lists_parse():
    assert simulate.parse_seeds("42-44,50") == [42, 43, 44, 50]
    with pytest.raises(argparse.ArgumentTypeError):
        simulate.parse_seeds("9-1")
    with pytest.raises(argparse.ArgumentTypeError):
        simulate.parse_policies("fgd,nope")


def test_an_unusable_out_directory_is_refused_before_any_run(tmp_path, capsys):
    nodes, tasks = sample(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    rc = run_cli(["--nodes", str(nodes), "--tasks", str(tasks), "--out", str(blocker / "o"),
                  "--no-progress"])
    assert rc == 2
    assert capsys.readouterr().err == f"error: --out {blocker / 'o'}: Not a directory\n"


@pytest.mark.parametrize(("argv", "expected"), [
    (["--hours", "-1"], "--hours -1.0: must be above 0"),
    (["--load", "0"], "--load 0.0: must be above 0"),
    (["--workload", "openb", "--day-start", "-5"],
     "--day-start -5.0: must be 0 or more (seconds into the trace)"),
    (["--workload", "lora", "--time-scale", "0"], "--time-scale 0.0: must be above 0"),
    (["--adapt", "--consolidate", "-5"], "--consolidate -5.0: must be a percentage (0-100)"),
    (["--adapt", "--throttle", "2"], "--throttle 2.0: must be a share from 0 to 1"),
    (["--fail-fraction", "-0.5"], "--fail-fraction -0.5: must be a share from 0 to 1"),
    (["--gpu-fail-fraction", "1.5"], "--gpu-fail-fraction 1.5: must be a share from 0 to 1"),
    (["--hours", "0.0001"],
     "mixed workload: no job to simulate (a longer --hours or a higher --load gives some)"),
], ids=["negative hours", "no load", "a day that starts before the trace",
        "a time scale of 0 (it divides)", "a negative consolidation threshold",
        "more GPUs throttled than there are", "a negative failure share",
        "a GPU failure share over 1", "a workload too short for any job to arrive"])
def test_time_mode_options_out_of_range_are_named_before_any_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
        expected: str) -> None:
    """Each was a traceback (a division by zero, numpy's sample sizes), a message naming
    no option, or, for --consolidate, silently accepted."""
    out = tmp_path / "o"
    assert run_cli(["--mode", "time", *argv, "--out", str(out), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"error: {expected}\n"
    assert not (out / "summary.md").exists()
