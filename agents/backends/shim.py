"""Tiny supervisor between the executor and a task process.

Why: only a process's parent can read its exit status. If the executor is
restarted (upgrade, crash) while tasks run, their exit codes would be lost and
every such task would have to be reported as "lost". The executor therefore
starts each task through this shim, in its own session: the shim survives the
executor, forwards the signals it receives to the task's process group, waits
for the task and writes the exit status to a small JSON file the (new)
executor reads.

Run (by the process backend): ``python -I .../shim.py --status FILE -- ARGV...``
(standard library only, so it runs by path whatever the task's environment).
The shim exits with the task's exit code (128+N when signal N killed it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def write_status(path: Path, status: dict[str, object]) -> None:
    """Atomically write the status file (rename over a temp file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(status), encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agents.backends.shim")
    parser.add_argument("--status", type=Path, required=True)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    started = time.time()
    # The executor signals the whole process group (shim and task). The shim must
    # outlive the task to record its status, so it only notes the signals;
    # Python handlers, unlike SIG_IGN, are reset to the default in the child on exec.
    for sig in FORWARDED:
        signal.signal(sig, lambda *_: None)
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        write_status(args.status, {"launch_error": str(exc), "started": started})
        return 127
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
    exit_code = 128 - code if code < 0 else code
    status: dict[str, object] = {
        "exit_code": exit_code,
        "signal": -code if code < 0 else None,
        "pid": child.pid,
        "started": started,
        "ended": time.time(),
    }
    write_status(args.status, status)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
