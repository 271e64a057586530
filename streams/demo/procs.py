"""Child processes of the demo, each in its own process group, stopped in order.

Why process groups: the worker and the simulated cluster may start children of
their own; signalling the group (``killpg``) reaches all of them, so Ctrl-C in
the terminal -- which the demo catches -- never leaves a stray process. Every
child also carries ``HETSCHED_DEMO_RUN=<run id>`` in its environment, so a test
can check afterwards that nothing of a run survived. On Linux each child also
asks the kernel for SIGTERM when the demo process dies (``PR_SET_PDEATHSIG``),
so even a demo killed with SIGKILL, which cannot clean up, leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MARKER_ENV = "HETSCHED_DEMO_RUN"
PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    """libc's prctl, looked up once in the parent: the child must not import or load."""
    if sys.platform != "linux":
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the demo process goes away."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)

@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    grace_s: float | None = None
    """Seconds between SIGTERM and SIGKILL for this child (None: ``stop_all``'s)."""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Children:
    """The demo's processes; :meth:`stop_all` ends them in reverse start order."""

    log_dir: Path
    run_id: str
    started: list[Child] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str], *,
              grace_s: float | None = None) -> Child:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                argv, env=dict(env, **{MARKER_ENV: self.run_id}), stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=_die_with_parent)  # runs before exec; no threads yet here
        child = Child(name, proc, log_path, grace_s)
        self.started.append(child)
        return child

    def stop_all(self, grace_s: float = 15.0) -> None:
        """SIGTERM each group (last started first), wait, then SIGKILL what is left."""
        for child in reversed(self.started):
            stop(child, grace_s if child.grace_s is None else child.grace_s)


def stop(child: Child, grace_s: float) -> None:
    """End one child's process group: SIGTERM, ``grace_s`` to exit, then SIGKILL."""
    pgid = child.proc.pid
    began = time.monotonic()
    if child.alive():
        _signal(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while child.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
    # The leader may be gone while grandchildren of the group still run.
    _signal(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.proc.wait(5)
    print(f"hetsched demo: {child.name} stopped in {time.monotonic() - began:.1f} s "
          f"(exit {child.proc.returncode})", file=sys.stderr, flush=True)


def _signal(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
