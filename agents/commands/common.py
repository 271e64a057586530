"""Flags shared by the node commands, and turning them into a :class:`NodeConfig`.

Only the knobs an operator changes often get a dedicated flag; everything else
is reachable with ``--set section.key=value`` or the config file, and
``hetsched-node config`` prints the result with every default.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agents.config import NodeConfig
from schemas.command_line import CommandError
from schemas.event_loop import use_event_loop

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(text: str) -> str:
    """``--log-level``: a level name in any case (argparse type; it was a traceback from
    ``logging`` once the command had started)."""
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r}: not a log level ({', '.join(LOG_LEVELS)})")
    return text.upper()


def metrics_port(text: str) -> int:
    """``--metrics-port``: a TCP port, or 0 for none (argparse type; a port past 65535 was
    a traceback from the metrics server's bind)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a port number") from None
    if not 0 <= port < 65536:
        raise argparse.ArgumentTypeError(f"{port}: must be a TCP port, or 0 for none")
    return port


def add_node_arguments(parser: argparse.ArgumentParser, *, simulate: bool = True) -> None:
    g = parser.add_argument_group("node configuration (flags override --config)")
    g.add_argument("--config", metavar="FILE", help="YAML/JSON config file")
    g.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any setting, e.g. triggers.gpu_util_pct.edges=[20,85] (repeatable)",
    )
    g.add_argument("--node-id", help="node id (default: hostname)")
    g.add_argument("--cell", help="requested scheduling cell")
    if simulate:
        g.add_argument(
            "--simulate",
            metavar="MODEL[xCOUNT]",
            help="simulated GPUs from the GPU catalog, e.g. A100x8, instead of NVML",
        )
        g.add_argument("--time-scale", type=float, help="simulated seconds per wall second")
        g.add_argument(
            "--fault",
            dest="faults",
            action="append",
            default=None,
            metavar="SPEC",
            help="inject a fault: gpu-fail:IDX@T, throttle:IDX@T[+D], xid:IDX:CODE@T, "
            "node-loss@T, foreign-mem:IDX:MIB@T[+D] (repeatable)",
        )
    g.add_argument("--interval-s", type=float, help="GPU sampling period (1)")
    g.add_argument("--heartbeat-s", type=float, help="node heartbeat period (30)")
    g.add_argument("--min-interval-s", type=float, help="min seconds between GPU events (30)")
    g.add_argument("--state-dir", help="executor journal and task logs (var/hetsched-node)")
    g.add_argument(
        "--start-at",
        choices=["end", "beginning"],
        help="where a first start reads decisions from (end)",
    )
    g.add_argument("--bootstrap", help="Kafka host:port list (default: KAFKA_BOOTSTRAP)")
    g.add_argument("--topic-prefix", help="prefix for every topic name (isolated demos/tests)")
    g.add_argument("--log-level", type=log_level, default="INFO",
                   help="DEBUG, INFO, WARNING, ERROR (INFO)")
    g.add_argument("--metrics-port", type=metrics_port, default=0,
                   help="serve Prometheus metrics at :PORT/metrics (0 = off)")


def _flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    table: list[tuple[str, tuple[str, str]]] = [
        ("node_id", ("node", "node_id")),
        ("cell", ("node", "cell")),
        ("simulate", ("simulate", "gpus")),
        ("time_scale", ("simulate", "time_scale")),
        ("faults", ("simulate", "faults")),
        ("interval_s", ("telemetry", "interval_s")),
        ("heartbeat_s", ("triggers", "heartbeat_s")),
        ("min_interval_s", ("triggers", "min_interval_s")),
        ("state_dir", ("executor", "state_dir")),
        ("start_at", ("executor", "start_at")),
        ("bootstrap", ("kafka", "bootstrap")),
        ("topic_prefix", ("kafka", "topic_prefix")),
    ]
    out: dict[str, Any] = {}
    for attr, (section, key) in table:
        value = getattr(args, attr, None)
        if value is not None:
            out.setdefault(section, {})[key] = value
    return out


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    """Defaults < ``--config`` < ``--set`` < dedicated flags."""
    from agents.config import build_config

    return build_config(args.config, args.sets, _flag_overrides(args))


def node_config(args: argparse.Namespace) -> NodeConfig:
    """``config_from_args`` for a command: a bad configuration is a ``CommandError``, one
    line naming each bad field and its value (exit status 2)."""
    from pydantic import ValidationError

    try:
        return config_from_args(args)
    except ValidationError as exc:
        raise CommandError(f"bad configuration: {validation_errors(exc)}") from None
    except (ValueError, OSError) as exc:
        raise CommandError(f"bad configuration: {exc}") from None


def validation_errors(exc: Any) -> str:
    """A pydantic ValidationError on one line: each field, its value and what is wrong."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(config)'}: value {err.get('input')!r}: "
        f"{err['msg']}" for err in exc.errors(include_url=False))


def fail(message: str) -> int:
    """Print a one-line error for the operator; the exit status for the command."""
    print(f"hetsched-node: {message}", file=sys.stderr)
    return 2


def task_user_problem(config: NodeConfig) -> str | None:
    """Why process tasks could not run as the configured account (None: they can),
    before the node starts: a missing account is one line naming the setting, not a
    failure of every task later."""
    from agents.task_user import TaskUserError, task_account

    try:
        task_account(config.executor)
    except TaskUserError as exc:
        return str(exc)
    return None


def serve_node(args: argparse.Namespace, *, agent: bool, executor: bool) -> int:
    """Run one node's agent and/or executor until SIGTERM; the shared body of
    ``hetsched-node agent|executor|run``."""
    import asyncio

    from agents import logs
    from agents.runtime import make_source, serve, trusted_keyring
    from agents.telemetry.base import SourceUnavailable

    logs.setup(args.log_level)
    config = node_config(args)
    try:
        trusted_keyring(config)  # fail now, not after connecting, on a bad key file
    except (ValueError, OSError) as exc:
        return fail(f"executor.trusted_schedulers: {exc}")
    if executor and (problem := task_user_problem(config)) is not None:
        return fail(problem)
    try:
        source = make_source(config)
    except SourceUnavailable as exc:
        print(f"hetsched-node: {exc}", file=sys.stderr)
        return 3
    except KeyError as exc:
        return fail(str(exc.args[0]) if exc.args else str(exc))
    except ValueError as exc:  # a --fault / simulate.faults spec
        return fail(str(exc))
    use_event_loop()  # HETSCHED_EVENT_LOOP, uvloop by default: less client CPU per send
    return asyncio.run(serve([config], agent=agent, executor=executor, sources=[source],
                             metrics_port=args.metrics_port))
