"""Per-cell adaptation state that is not a task or node record.

``windows`` are soft state: recent utilisation per task, rebuilt from new
telemetry after a restart (a decision that needed a full window then waits
one more window). ``meta`` is persisted with the cell's meta record: learnt
profiles per (tenant, command), the migration budget's recent moves, and
counters the simulator and benchmark report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streams.core.adapt.config import AdaptConfig
from streams.core.adapt.window import Window


@dataclass(slots=True)
class TaskWindows:
    util: Window
    mem_util: Window
    mem_mib: Window


@dataclass(slots=True)
class AdaptRuntime:
    config: AdaptConfig
    windows: dict[str, TaskWindows] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def task_windows(self, task: str) -> TaskWindows:
        w = self.windows.get(task)
        if w is None:
            span = max([e.window_s for _, e in self.config.elastic] + [self.config.probe_s])
            w = self.windows[task] = TaskWindows(Window(span), Window(span), Window(span))
        return w

    def count(self, name: str, by: float = 1.0) -> None:
        counters = self.meta.setdefault("counters", {})
        counters[name] = counters.get(name, 0) + by
