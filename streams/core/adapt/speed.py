"""GPU model speed for the core's moves: how fast and how frugal each model runs a task.

Why: with ``AdaptConfig.model_speed`` on, a task's declared duration is its run time
on the fastest GPU model it may use (the simulator's ``--model-speed`` reference), so a
move to a slower model lengthens the rest of its run. The adaptive moves (placement
after a probe, hot-spot, throttle and defragmentation moves) then weigh completion time
against energy instead of ignoring speed.

Everything here is pure and reads only the GPU catalog figures the cluster state
already holds (``ClusterState.model_fp32_tflops``, ``model_bandwidth_gbps``,
``model_tdp_w``, registered with each node's model), never a file:

* **work kind** (``work_kind``): ``data`` when the probe classified the task as data
  (bandwidth) bound or the task names an input node (the rule of the ``energy``
  term's ``per_work`` and of the simulator), else ``compute``;
* **speed** of a model for a kind (``speeds``): its FP32 TFLOPS (compute) or memory
  bandwidth (data) over the best among the models the task may use (<= 1);
* **energy per unit of work**: TDP over that figure (the ``energy`` term's
  ``per_work`` figure), relative to the most frugal allowed model (>= 1);
* **trade-off** (``energy_share``): the hour's objectives decide. Of the active
  scheduler's placement terms, ``compute`` (objective ``completion_time``) weighs
  completion and the model part of ``energy`` (its weight times ``1 - busy_weight``)
  weighs energy; ``alpha = energy / (energy + completion)``, 0 when neither is present
  (a profile that does not ask for energy gets completion first).
  Cost of a model: ``(1 - alpha) * run_time_rel + alpha * energy_per_work_rel``
  (``ranked``), both 1 on the best model. So at peak (no ``energy`` term) the fastest
  model wins, off peak with an ``energy`` term the most frugal one does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streams.core.scheduler import Scheduler
    from streams.core.state import ClusterState

COMPLETION_POLICY = "compute"
"""The placement term of the ``completion_time`` objective
(``streams.profiles.objectives.OBJECTIVE_POLICIES``)."""
ENERGY_POLICY = "energy"
TIE = 1e-9


def work_kind(classified: str | None, has_input_node: bool) -> str:
    """``data`` for bandwidth-bound work (classified so, or with located input), else
    ``compute`` (a ``mixed`` or unclassified task without input node included)."""
    return "data" if classified == "data" or has_input_node else "compute"


def energy_share(sched: Scheduler) -> float:
    """The weight of energy against completion time in ``sched`` (module docstring)."""
    energy = completion = 0.0
    for policy, weight in zip(sched.policies, sched.weights, strict=True):
        scale = float(getattr(policy, "scale", 100.0)) / 100.0
        if policy.name == COMPLETION_POLICY:
            completion += weight * scale
        elif policy.name == ENERGY_POLICY:
            energy += weight * scale * (1.0 - float(getattr(policy, "busy_weight", 0.0)))
    total = energy + completion
    return energy / total if total > 0 else 0.0


def _figures(state: ClusterState, kind: str,
             allowed: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """Model -> (work figure, TDP) for the allowed models of the cell with catalog figures."""
    figure = state.model_bandwidth_gbps if kind == "data" else state.model_fp32_tflops
    out = {}
    for m, name in enumerate(state.model_names):
        if allowed and name not in allowed:
            continue
        f, tdp = float(figure[m]), float(state.model_tdp_w[m])
        if f > 0:
            out[name] = (f, tdp)
    return out


def speeds(state: ClusterState, kind: str, allowed: tuple[str, ...] = ()) -> dict[str, float]:
    """Each allowed model's work rate for ``kind`` over the fastest allowed one (<= 1)."""
    figs = _figures(state, kind, allowed)
    ref = max((f for f, _ in figs.values()), default=0.0)
    return {m: f / ref for m, (f, _) in figs.items()} if ref > 0 else {}


def speed_of(state: ClusterState, node: int, kind: str, allowed: tuple[str, ...] = ()) -> float:
    """The speed of ``node``'s model for ``kind`` (1.0 when its model has no figure)."""
    m = int(state.model[node])
    if m < 0:
        return 1.0
    return speeds(state, kind, allowed).get(state.model_names[m], 1.0)


def ranked(state: ClusterState, kind: str, allowed: tuple[str, ...],
           alpha: float) -> list[tuple[str, ...]]:
    """Allowed models in groups of equal cost, cheapest first (module docstring)."""
    figs = _figures(state, kind, allowed)
    if not figs:
        return []
    ref = max(f for f, _ in figs.values())
    per_work = {m: tdp / f for m, (f, tdp) in figs.items() if tdp > 0}
    frugal = min(per_work.values(), default=0.0)
    cost = {}
    for m, (f, _) in figs.items():
        e_rel = per_work[m] / frugal if m in per_work and frugal > 0 else 1.0
        cost[m] = (1.0 - alpha) * ref / f + alpha * e_rel
    groups: list[tuple[str, ...]] = []
    last = None
    for m in sorted(cost, key=lambda k: (cost[k], k)):
        if last is not None and abs(cost[m] - last) <= TIE:
            groups[-1] = (*groups[-1], m)
        else:
            groups.append((m,))
            last = cost[m]
    return [tuple(sorted(g)) for g in groups]
