"""Fault injection for simulated nodes: what fails, when, for how long.

Why a tiny text syntax: faults are given on the command line of demos and
end-to-end tests (``--fault gpu-fail:1@30``), so they must be one token each.

* ``gpu-fail:IDX@T``        GPU IDX stops answering at T (like NVML "GPU is lost")
* ``throttle:IDX@T[+D]``    GPU IDX overheats and throttles from T, for D seconds
  (for good without ``+D``)
* ``xid:IDX:CODE@T``        GPU IDX raises XID CODE once at T
* ``node-loss@T``           the whole node goes silent at T (no heartbeats, no reports)
* ``foreign-mem:IDX:MIB@T[+D]``  a process no task owns takes MIB of GPU IDX's memory
  from T (for D seconds): what an unscheduled user looks like to the scheduler

T and D are wall seconds after the node starts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

FaultKind = Literal["gpu-fail", "throttle", "xid", "node-loss", "foreign-mem"]

_PATTERN = re.compile(
    r"^(?P<kind>gpu-fail|throttle|xid|node-loss|foreign-mem)"
    r"(?::(?P<gpu>\d+))?(?::(?P<code>\d+))?"
    r"@(?P<at>\d+(?:\.\d+)?)(?:\+(?P<dur>\d+(?:\.\d+)?))?$"
)


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected fault."""

    kind: FaultKind
    at_s: float
    gpu: int | None = None
    duration_s: float = math.inf
    xid: int | None = None
    mem_mib: int | None = None
    """Memory a ``foreign-mem`` process holds."""

    def active(self, elapsed_s: float) -> bool:
        """Whether the fault is in effect ``elapsed_s`` after start."""
        return self.at_s <= elapsed_s < self.at_s + self.duration_s


def parse_fault(text: str) -> Fault:
    """Parse one fault token; ``ValueError`` says what the syntax is."""
    m = _PATTERN.match(text.strip())
    if m is None:
        raise ValueError(
            f"bad fault {text!r}: expected gpu-fail:IDX@T, throttle:IDX@T[+D], "
            "xid:IDX:CODE@T, node-loss@T or foreign-mem:IDX:MIB@T[+D]"
        )
    kind: FaultKind = m["kind"]  # type: ignore[assignment]
    gpu = int(m["gpu"]) if m["gpu"] is not None else None
    if kind == "node-loss":
        if gpu is not None:
            raise ValueError(f"bad fault {text!r}: node-loss takes no GPU index")
    elif gpu is None:
        raise ValueError(f"bad fault {text!r}: {kind} needs a GPU index")
    if (kind in ("xid", "foreign-mem")) != (m["code"] is not None):
        raise ValueError(
            f"bad fault {text!r}: only xid (a code) and foreign-mem (MiB) take, and need, "
            "a second number"
        )
    duration = float(m["dur"]) if m["dur"] is not None else math.inf
    if m["dur"] is not None and kind not in ("throttle", "foreign-mem"):
        raise ValueError(f"bad fault {text!r}: only throttle and foreign-mem take a +duration")
    number = int(m["code"]) if m["code"] is not None else None
    return Fault(
        kind=kind,
        at_s=float(m["at"]),
        gpu=gpu,
        duration_s=duration,
        xid=number if kind == "xid" else None,
        mem_mib=number if kind == "foreign-mem" else None,
    )
