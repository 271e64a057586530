"""The executor without a broker: decisions in, status events out (in memory).

The same paths run against the real broker in ``test_agent_broker.py``; here
each behaviour is pinned down quickly and precisely.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import decisions as d
import pytest

from agents.backends.process import ProcessBackend
from agents.backends.simulated import SimulatedBackend
from agents.bus import MemoryPublisher, Topics
from agents.config import ExecutorSection
from agents.executor import Executor, gang_environment
from agents.feed import DecisionFeed
from agents.journal import Journal
from agents.sandbox import SandboxPolicy
from agents.telemetry.base import GpuSample
from agents.telemetry.faults import parse_fault
from agents.telemetry.simulated import SimulatedNode
from schemas.events import ExecutorSpec
from schemas.gpu_catalog import get_model

NODE = "node-1"
ENV_DUMP = (
    "import json, os, sys; keys = ['CUDA_VISIBLE_DEVICES', 'CUDA_DEVICE_ORDER', "
    "'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE', 'CUDA_MPS_PINNED_DEVICE_MEM_LIMIT', "
    "'HETSCHED_TASK_ID', 'HETSCHED_GPU_MEMORY_MIB', 'EXTRA']; "
    "json.dump({k: os.environ.get(k) for k in keys}, open(sys.argv[1], 'w')); "
    "print('hello from the task'); sys.exit(int(sys.argv[2]))"
)
TRAP = (  # exits 7 on SIGTERM, notes SIGUSR1 (checkpoint) in a file; <file>.ready once armed
    "import signal, sys, time, pathlib; p = pathlib.Path(sys.argv[1]); "
    "signal.signal(signal.SIGUSR1, lambda *a: p.write_text('checkpointed')); "
    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7)); "
    "p.with_suffix('.ready').write_text('armed'); time.sleep(120)"
)


async def wait_until_armed(marker: Path, timeout_s: float = 30.0) -> None:
    """Wait for a TRAP task to install its signal handlers (a fixed sleep races on a busy host)."""
    ready = marker.with_suffix(".ready")
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not ready.exists():
        assert asyncio.get_running_loop().time() < deadline, "the task never armed its handlers"
        await asyncio.sleep(0.05)


class Harness:
    def __init__(
        self,
        tmp: Path,
        *,
        sim_node: SimulatedNode | None = None,
        time_scale: float = 1.0,
        sandbox: SandboxPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.tmp = tmp
        self.sandbox = sandbox
        self.publisher = MemoryPublisher()
        self.journal = Journal(tmp / "journal.sqlite")
        self.sim_node = sim_node
        self.time_scale = time_scale
        self.clock = clock
        self.executor = self._make()

    def _make(self) -> Executor:
        config = ExecutorSection(
            state_dir=self.tmp, grace_s=5, checkpoint_grace_s=1, usage_interval_s=0.2
        )
        ex = Executor(
            NODE,
            self.journal,
            self.publisher,
            Topics("t."),
            config,
            gpu_indices=lambda: {0, 1, 2, 3},
            failed_gpus=lambda: {3},
            sandbox=self.sandbox,
            gpu_memory_mib=lambda: {i: 16384 for i in range(4)},
        )
        ex.add_backend(
            ProcessBackend(NODE, self.tmp, ex.on_exit, checkpoint_grace_s=1, sandbox=self.sandbox)
        )
        self.simulated = SimulatedBackend(ex.on_exit, node=self.sim_node,
                                          time_scale=self.time_scale, clock=self.clock)
        ex.add_backend(self.simulated)
        return ex

    def restart(self) -> None:
        """A new executor on the same journal (as after a process restart)."""
        self.journal = Journal(self.tmp / "journal.sqlite")
        self.executor = self._make()

    def status(self, event_type: str | None = None, task_id: str | None = None) -> list:
        return [
            p
            for p in self.publisher.payloads(event_type)
            if task_id is None or getattr(p, "task_id", None) == task_id
        ]

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; sent: {self.publisher.payloads()}")
            await asyncio.sleep(0.02)


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.executor.config = harness.executor.config.model_copy(update={"on_exit": "stop"})
    await harness.executor.close()


async def test_decisions_for_other_nodes_are_ignored(h: Harness) -> None:
    env = d.placed("t1", "another-node", d.simulated(1), d.gpus(0))
    assert await h.executor.handle(env) == "other-node"
    assert h.publisher.sent == [] and h.journal.applied_count() == 0


async def test_a_redelivered_decision_is_applied_once_also_after_a_restart(h: Harness) -> None:
    env = d.placed("t1", NODE, d.simulated(3600), d.gpus(0))
    assert await h.executor.handle(env) == "started"
    assert await h.executor.handle(env) == "duplicate"
    await h.executor.close()
    h.restart()
    assert await h.executor.handle(env) == "duplicate"
    assert len(h.status("TaskStarted")) == 1


async def test_a_process_task_runs_with_the_right_environment_and_logs(h: Harness) -> None:
    out = h.tmp / "env.json"
    spec = d.python(ENV_DUMP).model_copy(
        update={"argv": [*d.python(ENV_DUMP).argv, str(out), "0"], "env": {"EXTRA": "x"}}
    )
    await h.executor.handle(d.placed("t-env", NODE, spec, d.gpus(1, 2)))
    await h.until(lambda: bool(h.status("TaskFinished")))
    env = json.loads(out.read_text())
    assert env["CUDA_VISIBLE_DEVICES"] == "1,2" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["HETSCHED_TASK_ID"] == "t-env" and env["EXTRA"] == "x"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] is None  # whole GPUs: no MPS limits
    (started,) = h.status("TaskStarted")
    assert started.gpu_indices == [1, 2]
    (finished,) = h.status("TaskFinished")
    assert finished.exit_code == 0 and finished.decision_id == started.decision_id
    assert "hello from the task" in (h.tmp / "logs" / "t-env.log").read_text()


async def test_a_fractional_task_gets_mps_share_and_memory_limit(h: Harness) -> None:
    out = h.tmp / "env.json"
    spec = d.python(ENV_DUMP).model_copy(update={"argv": [*d.python(ENV_DUMP).argv, str(out), "0"]})
    await h.executor.handle(d.placed("t-frac", NODE, spec, d.gpus(2, share=250, memory_mib=4096)))
    await h.until(lambda: bool(h.status("TaskFinished")))
    env = json.loads(out.read_text())
    assert env["CUDA_VISIBLE_DEVICES"] == "2"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert env["HETSCHED_GPU_MEMORY_MIB"] == "4096"


async def test_a_nonzero_exit_code_becomes_task_failed(h: Harness) -> None:
    spec = d.python(ENV_DUMP).model_copy(
        update={"argv": [*d.python(ENV_DUMP).argv, str(h.tmp / "x.json"), "3"]}
    )
    await h.executor.handle(d.placed("t-3", NODE, spec, d.gpus(0)))
    await h.until(lambda: bool(h.status("TaskFailed")))
    (failed,) = h.status("TaskFailed")
    assert (failed.reason, failed.exit_code, failed.retryable) == ("exit_nonzero", 3, False)


async def test_a_supervisor_failure_is_the_tasks_failure_reason(h: Harness) -> None:
    """The shim cannot record an exit status (its folder is gone): the task is not run,
    and the shim's own error, not an empty message, is what the scheduler is told."""
    import shutil

    marker = h.tmp / "ran"
    spec = d.python("import pathlib, sys; pathlib.Path(sys.argv[1]).touch()")
    spec = spec.model_copy(update={"argv": [*spec.argv, str(marker)]})
    shutil.rmtree(h.tmp / "status")
    await h.executor.handle(d.placed("t-orphan", NODE, spec, d.gpus(0)))
    await h.until(lambda: bool(h.status("TaskFailed", "t-orphan")))
    (failed,) = h.status("TaskFailed", "t-orphan")
    assert failed.reason == "launch_error"
    assert "FileNotFoundError" in failed.message and str(h.tmp / "status") in failed.message
    assert not marker.exists()


async def test_an_exit_status_the_supervisor_cannot_file_still_reaches_the_report(
    h: Harness,
) -> None:
    """The status folder vanishes while the task runs: the shim's status, with its error,
    goes to the task's log, and the report carries both the exit code and the cause."""
    code = "import shutil, sys; shutil.rmtree(sys.argv[1]); sys.exit(3)"
    spec = d.python(code).model_copy(update={"argv": [*d.python(code).argv, str(h.tmp / "status")]})
    await h.executor.handle(d.placed("t-unfiled", NODE, spec, d.gpus(0)))
    await h.until(lambda: bool(h.status("TaskFailed", "t-unfiled")))
    (failed,) = h.status("TaskFailed", "t-unfiled")
    assert (failed.reason, failed.exit_code) == ("exit_nonzero", 3)
    assert failed.message.startswith("task supervisor: cannot write the exit status file")


FAKE = "import pathlib, sys; pathlib.Path(sys.argv[1]).touch()"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        pytest.param("PATH", "/tmp/attacker/bin", id="PATH picks the program a name runs"),
        pytest.param("LD_PRELOAD", "/tmp/attacker/hook.so", id="LD_PRELOAD injects a library"),
        pytest.param("LD_LIBRARY_PATH", "/tmp/attacker/lib", id="LD_LIBRARY_PATH swaps libraries"),
        pytest.param("PYTHONPATH", "/tmp/attacker/py", id="PYTHONPATH injects modules"),
        pytest.param("PYTHONSTARTUP", "/tmp/attacker/x.py", id="any PYTHON variable"),
        pytest.param("CUDA_VISIBLE_DEVICES", "0,1,2,3", id="the executor's GPU placement"),
        pytest.param("CUDA_MPS_PIPE_DIRECTORY", "/tmp/no-mps", id="the MPS variables"),
        pytest.param("HETSCHED_TASK_ID", "someone-else", id="the executor's task identity"),
        pytest.param("HETSCHED_PROGRESS_FILE", "/etc/passwd", id="the executor's progress file"),
    ],
)
async def test_a_task_may_not_set_what_decides_which_code_runs_or_where(
    h: Harness, name: str, value: str
) -> None:
    """Without a sandbox (the default node), a task's environment could point an allowed
    command at another file, inject code into it, or override its GPU placement: such a
    task is refused, naming the variable, and the executor serves the next decision."""
    marker = h.tmp / "ran"
    spec = d.python(FAKE).model_copy(
        update={"argv": [*d.python(FAKE).argv, str(marker)], "env": {name: value, "EPOCHS": "3"}}
    )
    assert await h.executor.handle(d.placed("t-env", NODE, spec, d.gpus(0))) == "rejected"
    (failed,) = h.status("TaskFailed", "t-env")
    assert failed.reason == "launch_error" and "refused by node policy" in failed.message
    assert name in failed.message
    assert h.status("TaskStarted") == [] and not marker.exists()
    fine = spec.model_copy(update={"env": {"EPOCHS": "3"}})
    assert await h.executor.handle(d.placed("t-fine", NODE, fine, d.gpus(0))) == "started"
    await h.until(lambda: bool(h.status("TaskFinished", "t-fine")))


def test_every_variable_the_executor_sets_is_one_a_task_cannot_set() -> None:
    from agents.backends.base import TaskRun
    from agents.backends.process import added_environment
    from agents.sandbox import env_refusal

    run = TaskRun("t", "d", d.python("pass"), tuple(d.gpus(0, 1, share=250, memory_mib=512)))
    for name in added_environment(run, NODE):
        refusal = env_refusal([name], allowed=[name])
        assert refusal is not None and name in refusal


async def test_a_bare_command_runs_from_the_executors_path_even_where_a_task_may_set_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With PATH allowed by the operator, ``python`` is still the executor's ``python``:
    the name is resolved before the task's environment applies, and the log says which."""
    fake_dir = tmp_path / "attacker-bin"
    fake_dir.mkdir()
    fake_ran = tmp_path / "fake-ran"
    fake = fake_dir / "python"
    fake.write_text(f"#!/bin/sh\n: > {fake_ran}\n")  # a builtin: no PATH needed
    fake.chmod(0o755)
    own_bin = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", f"{own_bin}:{os.environ.get('PATH', os.defpath)}")
    policy = SandboxPolicy(
        allowed_commands=("python",), allowed_env=("PATH",), workdir_root=tmp_path / "tasks"
    )
    h = Harness(tmp_path, sandbox=policy)
    out = tmp_path / "exe.txt"
    code = "import os, sys; open(sys.argv[1], 'w').write(sys.executable + ' ' + os.environ['PATH'])"
    spec = ExecutorSpec(
        kind="process", argv=["python", "-c", code, str(out)], env={"PATH": str(fake_dir)}
    )
    assert await h.executor.handle(d.placed("t-path", NODE, spec, d.gpus(0))) == "started"
    await h.until(lambda: bool(h.status("TaskFinished", "t-path")))
    ran, task_path = out.read_text().split(" ")
    assert not fake_ran.exists() and Path(ran).parent == Path(own_bin)
    assert task_path == str(fake_dir)  # the allowed variable itself is the task's
    assert f"argv=['{own_bin}/python', '-c'" in (tmp_path / "logs" / "t-path.log").read_text()
    await h.executor.close()


async def test_preemption_stops_the_task_and_reports_its_exit_code(h: Harness) -> None:
    marker = h.tmp / "ckpt"
    spec = d.python(TRAP).model_copy(update={"argv": [*d.python(TRAP).argv, str(marker)]})
    await h.executor.handle(d.placed("t-long", NODE, spec, d.gpus(0)))
    await wait_until_armed(marker)
    assert await h.executor.handle(d.preempted("t-long", NODE)) == "preempted"
    (failed,) = h.status("TaskFailed", "t-long")
    assert (failed.reason, failed.exit_code, failed.retryable) == ("killed", 7, True)
    assert "preempted by urgent" in failed.message
    assert not marker.exists()  # preemption sends no checkpoint signal
    assert h.executor.running_task_ids() == []


@pytest.mark.parametrize(
    ("assignment", "spec", "reason", "text"),
    [
        pytest.param(
            d.gpus(7),
            d.simulated(1),
            "launch_error",
            "GPU index 7 is not on node",
            id="a GPU index the node does not have",
        ),
        pytest.param(
            d.gpus(3), d.simulated(1), "gpu_failed", "GPU 3 has failed", id="a GPU that has failed"
        ),
        pytest.param(
            d.gpus(0),
            d.python("").model_copy(update={"argv": ["no-such-cmd-xyz"]}),
            "launch_error",
            "command not found",
            id="a command that does not exist",
        ),
        pytest.param(
            d.gpus(0),
            d.python("").model_copy(update={"kind": "container", "image": "x"}),
            "launch_error",
            "not available",
            id="an executor kind the node does not run",
        ),
    ],
)
async def test_bad_input_yields_task_failed_and_the_executor_keeps_serving(
    h: Harness, assignment: list, spec: object, reason: str, text: str
) -> None:
    assert await h.executor.handle(d.placed("bad", NODE, spec, assignment)) == "rejected"  # type: ignore[arg-type]
    (failed,) = h.status("TaskFailed", "bad")
    assert failed.reason == reason and text in failed.message
    assert (
        await h.executor.handle(d.placed("good", NODE, d.simulated(3600), d.gpus(0))) == "started"
    )


async def test_a_file_that_is_not_executable_is_a_launch_error(h: Harness) -> None:
    script = h.tmp / "not-executable.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    spec = d.python("").model_copy(update={"argv": [str(script)]})
    assert await h.executor.handle(d.placed("bad", NODE, spec, d.gpus(0))) == "rejected"
    (failed,) = h.status("TaskFailed", "bad")
    assert failed.reason == "launch_error" and "not executable" in failed.message


async def test_resize_checkpoints_then_restarts_on_the_new_gpus(h: Harness) -> None:
    marker = h.tmp / "ckpt"
    spec = d.python(TRAP).model_copy(update={"argv": [*d.python(TRAP).argv, str(marker)]})
    await h.executor.handle(d.placed("t-el", NODE, spec, d.gpus(0)))
    await wait_until_armed(marker)
    assert await h.executor.handle(d.resized("t-el", NODE, d.gpus(0, 1))) == "started"
    assert marker.read_text() == "checkpointed"
    first, second = h.status("TaskStarted", "t-el")
    assert (first.gpu_indices, second.gpu_indices) == ([0], [0, 1])
    assert h.status("TaskFailed") == []  # the stop for a resize is not a failure


async def test_migration_stops_here_and_starts_there(h: Harness) -> None:
    await h.executor.handle(d.placed("t-mig", NODE, d.simulated(3600), d.gpus(0)))
    out = d.migrating("t-mig", NODE, "node-2", d.simulated(3600), d.gpus(0), d.gpus(1))
    assert await h.executor.handle(out) == "migrated-out"
    assert h.executor.running_task_ids() == [] and h.status("TaskFailed") == []
    back = d.migrating("t-mig", "node-2", NODE, d.simulated(3600), d.gpus(1), d.gpus(2))
    assert await h.executor.handle(back) == "started"
    assert h.status("TaskStarted", "t-mig")[-1].gpu_indices == [2]


def _neighbour(h: Harness, node: str = "node-2") -> Executor:
    """A second node's executor on the same journal, as in a simulated cluster."""
    ex = Executor(node, h.journal, h.publisher, Topics("t."), h.executor.config,
                  gpu_indices=lambda: {0, 1, 2, 3}, failed_gpus=lambda: set(),
                  gpu_memory_mib=lambda: {i: 16384 for i in range(4)})
    ex.add_backend(SimulatedBackend(ex.on_exit))
    return ex


async def test_a_migration_between_two_nodes_sharing_a_journal_starts_at_its_destination(
    h: Harness,
) -> None:
    """A simulated cluster's executors share one journal: the destination's part of a
    migration is not the source's claim (it was refused as "already applied")."""
    there = _neighbour(h)
    await h.executor.handle(d.placed("t-move", NODE, d.simulated(3600), d.gpus(0)))
    move = d.migrating("t-move", NODE, "node-2", d.simulated(3600), d.gpus(0), d.gpus(1))
    assert await h.executor.handle(move) == "migrated-out"
    assert await there.handle(move) == "started"
    assert await there.handle(move) == "duplicate"  # redelivered: still once per node
    assert there.running_task_ids() == ["t-move"] and h.executor.running_task_ids() == []
    await there.close()


async def test_each_node_of_a_shared_journal_restores_only_its_own_tasks(h: Harness) -> None:
    there = _neighbour(h)
    await h.executor.handle(d.placed("t-here", NODE, d.simulated(3600), d.gpus(0)))
    await there.handle(d.placed("t-there", "node-2", d.simulated(3600), d.gpus(0)))
    await h.executor.close()
    await there.close()
    h.restart()
    assert await h.executor.restore() == {"t-here": "lost"}
    again = _neighbour(h)
    assert await again.restore() == {"t-there": "lost"}
    reports = {(f.task_id, f.node_id) for f in h.status("TaskFailed")}
    assert reports == {("t-here", NODE), ("t-there", "node-2")}


async def test_a_task_left_running_is_adopted_with_its_exit_code_after_a_restart(
    h: Harness,
) -> None:
    go = h.tmp / "go"
    code = (
        "import pathlib, sys, time\n"
        "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\n"
        "sys.exit(5)"
    )
    spec = d.python(code).model_copy(update={"argv": [*d.python(code).argv, str(go)]})
    await h.executor.handle(d.placed("t-adopt", NODE, spec, d.gpus(0)))
    await h.executor.close()  # on_exit="leave": the task keeps running
    h.restart()
    assert await h.executor.restore() == {"t-adopt": "adopted"}
    go.write_text("now")
    await h.until(lambda: bool(h.status("TaskFailed", "t-adopt")))
    (failed,) = h.status("TaskFailed", "t-adopt")
    assert (failed.reason, failed.exit_code) == ("exit_nonzero", 5)


async def test_a_simulated_task_that_did_not_survive_a_restart_is_reported_lost(
    h: Harness,
) -> None:
    await h.executor.handle(d.placed("t-sim", NODE, d.simulated(3600), d.gpus(0)))
    await h.executor.close()
    h.restart()
    assert await h.executor.restore() == {"t-sim": "lost"}
    (failed,) = h.status("TaskFailed", "t-sim")
    assert failed.reason == "lost" and failed.retryable


async def test_a_placement_claimed_but_cut_short_is_reported_lost_after_a_restart(
    h: Harness,
) -> None:
    """The crash window between claiming a placement and starting it (journal ``pending``)."""
    started = asyncio.Event()

    async def never_starts(run: object) -> None:
        started.set()
        await asyncio.Event().wait()

    h.executor._backends["simulated"].start = never_starts
    env = d.placed("t-cut", NODE, d.simulated(3600), d.gpus(0))
    handling = asyncio.create_task(h.executor.handle(env))
    await asyncio.wait_for(started.wait(), 10)
    handling.cancel()  # the process stops here: claimed, not started, nothing reported
    with pytest.raises(asyncio.CancelledError):
        await handling
    assert h.status("TaskFailed") == [] and len(h.journal.pending()) == 1
    h.restart()
    assert await h.executor.restore() == {"t-cut": "lost"}
    (failed,) = h.status("TaskFailed", "t-cut")
    assert (failed.reason, failed.retryable) == ("lost", True)
    assert failed.decision_id == env.payload.decision_id
    assert h.publisher.sent[-1][1].causation_id == env.event_id
    h.restart()
    assert await h.executor.restore() == {} and len(h.status("TaskFailed", "t-cut")) == 1


async def test_a_task_whose_end_report_was_not_acknowledged_is_reported_after_a_restart(
    h: Harness,
) -> None:
    """The crash window between a task's end and Kafka's ack of its report: the journal
    must still hold the task, else the restarted executor says nothing and the scheduler
    believes the task runs for ever (one task in session 6's 30-minute chaos run)."""
    sending = asyncio.Event()
    publish = h.publisher.publish

    async def never_acknowledged(topic: Any, payload: Any, **kw: Any) -> Any:
        if type(payload).__name__ == "TaskFinished":
            sending.set()
            await asyncio.Event().wait()  # the process dies before the broker answers
        return await publish(topic, payload, **kw)

    h.publisher.publish = never_acknowledged  # type: ignore[method-assign]
    assert await h.executor.handle(d.placed("t-end", NODE, d.simulated(0.05), d.gpus(0))) \
        == "started"
    await asyncio.wait_for(sending.wait(), 20)
    assert h.status("TaskFinished", "t-end") == []
    h.publisher.publish = publish  # type: ignore[method-assign]
    h.restart()
    assert await h.executor.restore() == {"t-end": "lost"}
    (failed,) = h.status("TaskFailed", "t-end")
    assert (failed.reason, failed.retryable) == ("lost", True)


async def test_a_finished_action_leaves_nothing_pending(h: Harness) -> None:
    assert await h.executor.handle(d.placed("t-ok", NODE, d.simulated(3600), d.gpus(0))) \
        == "started"
    assert await h.executor.handle(d.placed("t-bad", NODE, d.simulated(1), d.gpus(3))) \
        == "rejected"  # GPU 3 has failed: refused and reported, not pending
    assert h.journal.pending() == []


async def test_usage_is_reported_for_running_tasks(h: Harness) -> None:
    await h.executor.handle(
        d.placed("t-use", NODE, d.simulated(3600, util=80), d.gpus(1, share=500))
    )
    h.executor._sample_usage()
    assert await h.executor.report_usage(1.0) == 1
    (usage,) = h.status("TaskUsage")
    assert usage.gpus[0].gpu_index == 1 and usage.gpus[0].gpu_util_pct == pytest.approx(40.0)


class VirtualClock:
    """Seconds that pass only when the test says so (the backend's ``clock``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_simulated_tasks_load_their_gpus_and_finish_by_the_throughput_model(
    tmp_path: Path,
) -> None:
    clock = VirtualClock()
    node = SimulatedNode("A100", 4, hostname=NODE, time_scale=100.0)
    h = Harness(tmp_path, sim_node=node, clock=clock)
    # 100 s of work on a V100 at full share; an A100 runs sqrt(fp16 x bandwidth) faster
    # (~2.4x) and time runs 100x: it finishes after 100 / 2.4 / 100 ~ 0.42 clock seconds.
    a100, v100 = get_model("A100"), get_model("V100M32")
    speed = math.sqrt(a100.fp16_tflops * a100.mem_bandwidth_gbps
                      / (v100.fp16_tflops * v100.mem_bandwidth_gbps))
    due = 100.0 / speed / 100.0
    began = clock.now
    await h.executor.handle(d.placed("t-fast", NODE, d.simulated(100, util=90), d.gpus(0)))
    reading = node.sample(clock.now)[0]
    assert isinstance(reading, GpuSample) and reading.util_pct > 0
    clock.now = began + 0.99 * due
    await h.simulated.tick()
    assert not h.status("TaskFinished") and h.executor.running_task_ids() == ["t-fast"]
    clock.now = began + 1.01 * due
    await h.simulated.tick()
    await h.until(lambda: bool(h.status("TaskFinished")), 10)
    (done,) = h.status("TaskFinished")
    assert done.runtime_s == pytest.approx(1.01 * due * 100.0)  # in simulated seconds
    reading = node.sample(clock.now)[0]
    assert isinstance(reading, GpuSample) and reading.util_pct == 0  # load removed
    await h.executor.close()


async def test_a_gpu_failure_fails_the_simulated_tasks_on_it(tmp_path: Path) -> None:
    node = SimulatedNode(
        "T4", 2, hostname=NODE, time_scale=1.0, faults=[parse_fault("gpu-fail:1@0.3")]
    )
    h = Harness(tmp_path, sim_node=node)
    await h.executor.handle(d.placed("t-doomed", NODE, d.simulated(3600), d.gpus(1)))
    await h.executor.handle(d.placed("t-fine", NODE, d.simulated(3600), d.gpus(0)))
    await h.until(lambda: bool(h.status("TaskFailed")), 10)
    (failed,) = h.status("TaskFailed")
    assert (failed.task_id, failed.reason, failed.retryable) == ("t-doomed", "gpu_failed", True)
    assert h.executor.running_task_ids() == ["t-fine"]
    await h.executor.close()


def test_the_nodes_kafka_credentials_are_not_passed_to_tasks() -> None:
    from agents.backends.base import TaskRun
    from agents.backends.process import task_environment

    run = TaskRun("t", "d", d.python("pass"), tuple(d.gpus(0)))
    env = task_environment(
        run, NODE, {"PATH": "/bin", "KAFKA_SASL_PASSWORD": "secret", "HETSCHED_X": "1"}
    )
    assert env["PATH"] == "/bin" and "KAFKA_SASL_PASSWORD" not in env and "HETSCHED_X" not in env
    assert env["HETSCHED_TASK_ID"] == "t"


async def test_with_a_sandbox_only_allowed_commands_run_confined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = SandboxPolicy(
        allowed_commands=(sys.executable,),
        allowed_env=("EXTRA",),
        workdir_root=tmp_path / "tasks",
        max_open_files=200,
    )
    h = Harness(tmp_path, sandbox=policy)
    monkeypatch.setenv("EXECUTOR_ONLY_SECRET", "must-not-leak")
    out = tmp_path / "env.json"
    code = (
        "import json, os, resource, sys; json.dump({'env': dict(os.environ), "
        "'cwd': os.getcwd(), 'nofile': resource.getrlimit(resource.RLIMIT_NOFILE)[0]}, "
        "open(sys.argv[1], 'w'))"
    )
    ok = d.python(code).model_copy(update={"argv": [*d.python(code).argv, str(out)]})
    assert await h.executor.handle(d.placed("ok", NODE, ok, d.gpus(1))) == "started"
    await h.until(lambda: bool(h.status("TaskFinished", "ok")))
    seen = json.loads(out.read_text())
    assert seen["cwd"] == str(tmp_path / "tasks" / "ok") and seen["nofile"] == 200
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert "EXECUTOR_ONLY_SECRET" not in seen["env"]

    refused = [
        ("curl", d.python("").model_copy(update={"argv": ["curl", "x"]}), d.gpus(0), "allow-list"),
        ("env", ok.model_copy(update={"env": {"LD_PRELOAD": "/x.so"}}), d.gpus(0), "LD_PRELOAD"),
        ("mem", ok, d.gpus(0, memory_mib=999_999), "MiB reserved"),
    ]
    for task_id, spec, gpus, text in refused:
        assert await h.executor.handle(d.placed(task_id, NODE, spec, gpus)) == "rejected"
        (failed,) = h.status("TaskFailed", task_id)
        assert failed.reason == "launch_error" and "refused by node policy" in failed.message
        assert text in failed.message
    await h.executor.close()


GANG_ENV_DUMP = (
    "import json, os, sys; keys = ['CUDA_VISIBLE_DEVICES', 'WORLD_SIZE', 'RANK', 'NODE_RANK', "
    "'LOCAL_WORLD_SIZE', 'NNODES', 'MASTER_ADDR', 'MASTER_PORT']; "
    "json.dump({k: os.environ.get(k) for k in keys}, open(sys.argv[1], 'w'))"
)


def test_every_member_of_a_gang_derives_the_same_rendezvous() -> None:
    placed = d.gang("t-gang", d.simulated(1), [("node-0", d.gpus(0, 1, 2)), (NODE, d.gpus(1, 2))])
    first, mine = (gang_environment(placed.payload, n) for n in ("node-0", NODE))
    port = str(20000 + zlib.crc32(b"t-gang") % 20000)
    shared = {"WORLD_SIZE": "5", "NNODES": "2", "MASTER_ADDR": "node-0", "MASTER_PORT": port}
    assert first == {**shared, "RANK": "0", "NODE_RANK": "0", "LOCAL_WORLD_SIZE": "3"}
    assert mine == {**shared, "RANK": "1", "NODE_RANK": "1", "LOCAL_WORLD_SIZE": "2"}


async def test_a_gang_member_runs_on_its_own_gpus_with_the_rendezvous_variables(
    h: Harness,
) -> None:
    out = h.tmp / "env.json"
    spec = d.python(GANG_ENV_DUMP).model_copy(
        update={"argv": [*d.python(GANG_ENV_DUMP).argv, str(out)], "env": {"MASTER_PORT": "1"}}
    )
    placed = d.gang("t-gang", spec, [("node-0", d.gpus(0, 1, 2)), (NODE, d.gpus(1, 2))])
    assert await h.executor.handle(placed) == "started"
    assert await h.executor.handle(placed) == "duplicate"
    await h.until(lambda: bool(h.status("TaskFinished")))
    env = json.loads(out.read_text())
    assert env == {"CUDA_VISIBLE_DEVICES": "1,2", **gang_environment(placed.payload, NODE)}
    assert env["MASTER_PORT"] != "1"  # the gang's port wins over the task's own
    (started,) = h.status("TaskStarted")
    assert (started.node_id, started.gpu_indices) == (NODE, [1, 2])
    assert started.decision_id == placed.payload.decision_id


async def test_a_gang_stop_naming_rank_0s_node_stops_the_member_on_every_node(
    h: Harness,
) -> None:
    """The scheduler stops a gang with one ``TaskPreempted`` naming rank 0's node: every
    member's node (sharing a journal, as in a simulated cluster) stops its own, once."""
    first, stranger = _neighbour(h, "node-0"), _neighbour(h, "node-9")
    placed = d.gang("t-gang", d.simulated(3600), [("node-0", d.gpus(0)), (NODE, d.gpus(1, 2))])
    assert await first.handle(placed) == "started"
    assert await h.executor.handle(placed) == "started"
    assert await stranger.handle(placed) == "other-node"
    stop = d.wrap(d.preempted("t-gang", "node-0").payload.model_copy(update={"requeue": False}))
    assert await stranger.handle(stop) == "other-node"
    assert await h.executor.handle(stop) == "preempted"
    assert await first.handle(stop) == "preempted"
    assert await h.executor.handle(stop) == "other-node"  # redelivered: nothing runs here now
    assert first.running_task_ids() == [] and h.executor.running_task_ids() == []
    reports = {(f.node_id, f.reason, f.retryable, f.decision_id) for f in h.status("TaskFailed")}
    did = stop.payload.decision_id
    assert reports == {("node-0", "killed", False, did), (NODE, "killed", False, did)}
    await first.close()
    await stranger.close()


async def test_one_decision_consumer_hands_a_gangs_stop_to_every_member_node(h: Harness) -> None:
    """``sim-cluster``'s one feed dispatches by the nodes a decision names; a gang's stop
    names rank 0's node only, so the feed also hands it to every node running a member."""
    first, stranger = _neighbour(h, "node-0"), _neighbour(h, "node-9")
    executors = {"node-0": first, NODE: h.executor, "node-9": stranger}
    feed = DecisionFeed("unused:9092", Topics("t."), None, h.journal, executors)  # type: ignore[arg-type]
    placed = d.gang("t-gang", d.simulated(3600), [("node-0", d.gpus(0)), (NODE, d.gpus(1))])
    assert feed._concerned(placed.payload) == [first, h.executor]
    for executor in (first, h.executor):
        await executor.handle(placed)
    stop = d.preempted("t-gang", "node-0")
    assert feed._concerned(stop.payload) == [first, h.executor]
    assert feed._concerned(d.preempted("other", "node-0").payload) == [first]
    await first.close()
    await stranger.close()
