"""Unit checks of the demo's utilisation plumbing and the long commands' progress bars.

The demo once reported 0 % GPU utilisation at 300x: the agents smoothed
utilisation over 300 *wall* seconds while the simulated GPUs ran 300 times
faster, so a busy GPU never crossed a band. These tests pin the pieces of the
fix without a broker.
"""

from __future__ import annotations

import functools
import io
import sys
from pathlib import Path

import pytest

from agents.config import NodeConfig
from agents.runtime import trigger_config
from agents.telemetry.simulated import SimulatedNode
from agents.telemetry.traces import GenaiCurves, load_genai
from agents.triggers import TriggerEngine, TriggerKind
from streams.demo.tracker import Tracker


@functools.cache
def _curves() -> GenaiCurves:
    return load_genai()  # a few seconds: once per session


def _busy_gpu_reports(scale: float, triggers: bool) -> list[float]:
    """Utilisation of the GpuTelemetry events of one GPU idle at start, busy after 1 s."""
    cfg = NodeConfig.model_validate({
        "node": {"node_id": "n1"}, "simulate": {"gpus": "V100M16x1", "time_scale": scale},
        "triggers": {"min_interval_s": 2}})
    source = SimulatedNode("V100M16", 1, hostname="n1", time_scale=scale, curves=_curves(),
                           start_s=0.0)
    engine = TriggerEngine(trigger_config(cfg) if triggers else cfg.triggers)
    reports = []
    for t in range(60):
        if t == 1:
            source.add_load(0, "task", share=1.0, util_pct=80.0, mem_mib=4096, now_s=1.0)
        for trig in engine.observe(float(t), source.sample(float(t))):
            if trig.kind in (TriggerKind.SNAPSHOT, TriggerKind.TELEMETRY):
                assert trig.state is not None
                reports.append(trig.state.util_pct)
    return reports


def test_a_busy_simulated_gpu_at_300x_is_reported_busy_within_a_minute() -> None:
    assert max(_busy_gpu_reports(300.0, triggers=True)) > 30


def test_unscaled_smoothing_at_300x_would_report_the_gpu_idle() -> None:
    assert _busy_gpu_reports(300.0, triggers=False) == [0.0]


def test_trigger_smoothing_is_unchanged_on_real_time_nodes() -> None:
    cfg = NodeConfig.model_validate({"node": {"node_id": "n1"},
                                     "simulate": {"gpus": "T4", "time_scale": 1.0}})
    assert trigger_config(cfg) == cfg.triggers


def test_the_tracker_prefers_sampled_utilisation_and_keeps_the_reported_one() -> None:
    tracker = Tracker()
    tracker.nodes = [{"node": "a", "model": "T4", "gpus_used_milli": [1000, 0]}]
    tracker.telemetry = {("a", 0): (40.0, 50.0), ("a", 1): (0.0, 30.0)}
    assert tracker.utilisation() == pytest.approx(0.2)  # no scrape yet: the reported view
    tracker.note_gpus({("a", 0): (90.0, 70.0), ("a", 1): (10.0, 31.0)})
    assert tracker.utilisation() == pytest.approx(0.5)
    assert tracker.reported_utilisation() == pytest.approx(0.2)
    assert tracker.utilisation_by_model() == {"T4": pytest.approx(0.5)}


def test_progress_bars_stay_off_when_stderr_is_not_a_terminal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from streams.progress import progress_bar

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with progress_bar(total=10, unit="event", desc="replay") as bar:
        bar.update(10)
    assert bar.disable and err.getvalue() == ""


def test_demo_children_die_with_a_demo_killed_by_sigkill(tmp_path: Path) -> None:
    """SIGKILL gives the demo no chance to stop its children; the kernel must."""
    import os
    import signal
    import subprocess
    import sys
    import time

    parent = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from streams.demo.procs import Children\n"
        "c = Children(Path(sys.argv[1]), 'orphan-test')\n"
        "child = c.start('sleeper', [sys.executable, '-c', 'import time; time.sleep(60)'], {})\n"
        "print(child.proc.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    demo = subprocess.Popen([sys.executable, "-c", parent, str(tmp_path)],
                            stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
    assert demo.stdout is not None
    child_pid = int(demo.stdout.readline())
    demo.send_signal(signal.SIGKILL)
    demo.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            return
        # A dead child stays a zombie of init until reaped; treat that as gone.
        stat = Path(f"/proc/{child_pid}/stat")
        if stat.exists() and stat.read_text().split()[2] == "Z":
            return
        time.sleep(0.1)
    os.kill(child_pid, signal.SIGKILL)
    raise AssertionError("the demo's child outlived a SIGKILLed demo")
