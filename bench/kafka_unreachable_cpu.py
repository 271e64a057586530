"""CPU a scheduler worker and a node burn while Kafka is unreachable.

    .venv/bin/python bench/kafka_unreachable_cpu.py [--seconds 10] [--outage-seconds 5]
        [--port 19492] [--out FILE]

Why a bench: tests/reliability/test_kafka_unreachable.py used to assert these
figures (under 1.5 CPU-s over 10 s of waiting for a broker that never was, and
over 5 s of an outage mid-run). CPU seconds depend on the machine and on what
else runs on it, so as assertions they failed on a loaded host and proved
nothing about correctness; the test now checks what the processes do (wait,
report 503 with the error, retry, recover, lose nothing) and this script
measures what it costs. Measured before the move: ~0.0 CPU-s for both over 10 s
of waiting (one attempt per backoff step; a loop retrying without pause would
burn ~10) and ~0.35 CPU-s for the worker over 5 s of outage (its aiokafka
clients reconnect every 100 ms each; a busy loop would burn ~5).

Phases, on a port of its own (``--port``, its +1 the broker's controller):

1. ``waiting``: a worker and a node start while nothing listens on the port; once
   both say 503 ``unreachable``, their CPU-s (utime + stime from /proc) over
   ``--seconds``.
2. ``outage``: the project's embedded broker starts there (``docker/kafka/kafka.sh``
   with ``HETSCHED_KAFKA_PORT`` and a scratch ``HETSCHED_KAFKA_HOME``); once both are
   healthy and the node is in the worker's cells it stops, and once both say 503
   again, the worker's CPU-s over ``--outage-seconds``. ``--no-outage`` skips it (no Java needed).

Prints one JSON document (and writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KAFKA_SH = REPO / "docker" / "kafka" / "kafka.sh"


def cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` in seconds, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def health_status(port: int) -> int:
    """HTTP status of ``/health`` on ``port``; 0 when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def wait_status(ports: list[int], status: int, procs: list[subprocess.Popen[bytes]],
                timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise SystemExit("a process exited; see its log under the scratch folder")
        if all(health_status(port) == status for port in ports):
            return
        time.sleep(0.25)
    raise SystemExit(f"/health of {ports} did not say {status} within {timeout_s:.0f} s")


def wait_for_node(web: int, procs: list[subprocess.Popen[bytes]], timeout_s: float) -> None:
    """Until the worker's cells hold the node: both are past their start-up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise SystemExit("a process exited; see its log under the scratch folder")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{web}/state", timeout=2) as r:
                if any(c["nodes"] for c in json.loads(r.read())["cells"].values()):
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"the node never reached the worker's cells within {timeout_s:.0f} s")


def cpu_over(procs: dict[str, subprocess.Popen[bytes]], seconds: float) -> dict[str, float]:
    before = {name: cpu_s(p.pid) for name, p in procs.items()}
    time.sleep(seconds)
    return {name: round(cpu_s(p.pid) - before[name], 3) for name, p in procs.items()}


def start(name: str, argv: list[str], env: dict[str, str], scratch: Path
          ) -> subprocess.Popen[bytes]:
    log = open(scratch / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0,
                    help="seconds of waiting for a broker that never was (default 10)")
    ap.add_argument("--outage-seconds", type=float, default=5.0,
                    help="seconds of a mid-run outage (default 5)")
    ap.add_argument("--no-outage", action="store_true", help="skip the outage phase")
    ap.add_argument("--port", type=int, default=19492,
                    help="the dead (then the broker's) port; its +1 is the controller's")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args()
    if listening(args.port) or listening(args.port + 1):
        raise SystemExit(f"port {args.port} or {args.port + 1} is taken: pick --port")

    scratch = Path(tempfile.mkdtemp(prefix="hetsched-unreachable-"))
    prefix = f"u{uuid.uuid4().hex[:8]}."
    web, metrics = free_port(), free_port()
    base = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    broker_env = dict(base, HETSCHED_KAFKA_PORT=str(args.port),
                      HETSCHED_KAFKA_HOME=str(scratch / "kafka"))
    env = dict(base, KAFKA_BOOTSTRAP=f"127.0.0.1:{args.port}", PYTHONUNBUFFERED="1",
               HETSCHED_KAFKA_RETRY_MAX_S="2", HETSCHED_APP_ID=f"{prefix}scheduler",
               HETSCHED_TOPIC_PREFIX=prefix, HETSCHED_WEB_PORT=str(web),
               HETSCHED_DATA_DIR=str(scratch / "worker"), HETSCHED_PARTITIONS="2",
               HETSCHED_CELLS="1", HETSCHED_TICK_S="1.0", HETSCHED_SESSION_S="6")
    worker = start("worker", [sys.executable, "-m", "streams.cli", "worker", "-l", "warn"],
                   env, scratch)
    node = start("node", [sys.executable, "-m", "agents.cli", "run", "--simulate", "A100x2",
                          "--node-id", f"{prefix}node", "--topic-prefix", prefix,
                          "--time-scale", "1", "--state-dir", str(scratch / "node"),
                          "--metrics-port", str(metrics)], env, scratch)
    procs = [worker, node]
    result: dict[str, Any] = {"scratch": str(scratch), "retry_max_s": 2.0}
    try:
        wait_status([web, metrics], 503, procs, 120)
        result["waiting"] = {"seconds": args.seconds,
                             "cpu_s": cpu_over({"worker": worker, "node": node}, args.seconds)}
        if not args.no_outage:
            subprocess.run([str(KAFKA_SH), "start"], env=broker_env, check=True,
                           capture_output=True, timeout=180)
            try:
                wait_status([web, metrics], 200, procs, 120)
                wait_for_node(web, procs, 120)
            finally:
                subprocess.run([str(KAFKA_SH), "stop"], env=broker_env, check=False,
                               capture_output=True, timeout=120)
            wait_status([web, metrics], 503, procs, 60)
            result["outage"] = {"seconds": args.outage_seconds,
                                "cpu_s": cpu_over({"worker": worker}, args.outage_seconds)}
    finally:
        stop(procs)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
