"""Gangs: one task on whole GPUs of several nodes, placed all at once or not at all. Pure.

A task is a *gang* when it asks for a shape over nodes (``nodes`` x
``gpus_per_node``) or for more whole GPUs than any node of its models has.
Multi-node training needs every member at once (its ranks meet at a
rendezvous and wait for each other), so a half-placed gang only holds GPUs
idle: one decision places every member, or the gang waits with nothing
booked.

Where the members go, in this order of preference (Slurm's and Volcano's
topology rules, with the packing concern of this project):

1. **One GPU model** (unless ``mixed_models``): ranks of a data-parallel job
   run in lock step, so the slowest GPU sets the pace of all; when the request
   carries speeds (``TaskRequest.speeds``: told, or learned by the cell from the
   class's runs), the fastest model for it that holds the gang now, since no
   choice of nodes makes up for a slower model (issue 35).
2. **The fewest nodes**: whole nodes are filled first (a node's idle GPUs all
   go to the gang), and only the remainder goes to one more node.
3. **The fewest racks**: when one rack can hold the gang on that many nodes,
   the gang stays in it (all-reduce traffic stays under one switch).
4. **The best links**: among equal choices, the one whose slowest link
   between members (``LinkMetrics``, else the rack default) is fastest.
5. **Least fragmentation**: the remainder member takes the node with the
   fewest idle GPUs that still hold it (best fit), so large holes stay whole
   for the next gang; then the nodes' tie-break rank.

CPU and memory are asked on every member's node (Slurm's ``--mem`` is per
node too). The plan's ``why`` says which of these rules chose the nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.state import ClusterState


@dataclass(frozen=True, slots=True)
class GangPlan:
    """Every member's node slot and GPU indices, in rank order, and why these nodes."""

    members: tuple[tuple[int, tuple[int, ...]], ...]
    why: str


def largest_node(state: ClusterState, req: TaskRequest) -> int:
    """The most GPUs one node of the request's models has (0: none of them)."""
    n = state.n
    ok = model_mask(state, req, np.ones(n, bool))
    counts = state.gpu_count[:n][ok]
    return int(counts.max()) if counts.shape[0] else 0


def is_gang(state: ClusterState, req: TaskRequest) -> bool:
    """A shape over nodes, or more whole GPUs than any node of its models has (when the
    cell has such nodes at all: else the one-node verdict says what is missing)."""
    if req.nodes > 1:
        return True
    if req.nodes or req.num_gpu < 2 or req.gpu_milli < MILLI_PER_GPU:
        return False
    largest = largest_node(state, req)
    return 0 < largest < req.num_gpu


def never_fits(state: ClusterState, req: TaskRequest) -> str | None:
    """Why the gang cannot fit even in the empty cell (None: it can), with both numbers."""
    n = state.n
    ok = (state.cpu_cap[:n] >= req.cpu_milli) & (state.mem_cap[:n] >= req.memory_mib)
    ok = model_mask(state, req, ok)
    models = "/".join(req.gpu_models) if req.gpu_models else "any model"
    counts = state.gpu_count[:n]
    if req.nodes:
        if req.mixed_models:
            have = int((ok & (counts >= req.gpus_per_node)).sum())
        else:
            have = max((int((ok & (counts >= req.gpus_per_node)
                             & (state.model[:n] == m)).sum()) for m in _models(state, ok)),
                       default=0)
        if have < req.nodes:
            return (f"asks for {req.nodes} nodes with {req.gpus_per_node} GPUs each "
                    f"({models}); the cell has {have} such nodes")
        return None
    if req.mixed_models:
        have = int(counts[ok].sum())
    else:
        have = max((int(counts[ok & (state.model[:n] == m)].sum())
                    for m in _models(state, ok)), default=0)
    if have < req.num_gpu:
        one = "" if req.mixed_models else " of one model"
        return (f"asks for {req.num_gpu} GPUs ({models}){one}; the cell has {have}")
    return None


def plan(state: ClusterState, req: TaskRequest) -> GangPlan | None:
    """Where the whole gang runs now (see the module docstring), or None: it waits.

    Unhealthy nodes are never chosen (a reservation hides its nodes this way).
    """
    n = state.n
    ok = (state.healthy[:n] & (state.cpu_free[:n] >= req.cpu_milli)
          & (state.mem_free[:n] >= req.memory_mib))
    ok = model_mask(state, req, ok)
    idle = idle_gpus(state)
    speed = dict(req.speeds) if not req.mixed_models else {}
    groups = [(ok, "")] if req.mixed_models else [
        (ok & (state.model[:n] == m), state.model_names[m]) for m in _models(state, ok)]
    best: tuple[tuple, GangPlan] | None = None
    for group, model in groups:
        found = _plan_group(state, req, np.flatnonzero(group & (idle > 0)), idle)
        if found is None:
            continue
        key = (-speed.get(model, 0.0), *found[0]) if speed else found[0]
        if best is None or key < best[0]:
            best = (key, found[1])
    if best is None:
        return None
    if speed:
        chosen = best[1]
        return GangPlan(chosen.members, f"{chosen.why}; the fastest model for it that holds "
                        f"it now ({-best[0][0]:.2f} of its fastest's speed)")
    return best[1]


def idle_gpus(state: ClusterState) -> np.ndarray:
    """Idle whole GPUs per node (what a gang member can take)."""
    n = state.n
    return (state.gpu_free[:n] == MILLI_PER_GPU).sum(axis=1)


# ---- the choice ------------------------------------------------------------------------


def _plan_group(state: ClusterState, req: TaskRequest, cand: np.ndarray,
                idle: np.ndarray) -> tuple[tuple, GangPlan] | None:
    """The best plan within one group of nodes (one model), with its sort key."""
    if cand.shape[0] == 0:
        return None
    topo = state.topology
    names = state.node_names
    racks: dict[str, list[int]] = {}
    for i in cand.tolist():
        racks.setdefault(topo.rack_of.get(names[i], f"node:{names[i]}"), []).append(i)
    options: list[tuple[tuple, list[tuple[int, int]]]] = []
    for rack in sorted(racks):  # one rack: the fewest racks when it holds the gang
        if int(idle[racks[rack]].sum()) < req.num_gpu:
            continue
        chosen = _choose(state, req, racks[rack], idle)
        if chosen is not None:
            options.append((_key(state, chosen, idle, 1), chosen))
    if len(racks) > 1:  # across racks: fewer nodes may beat any one rack
        chosen = _choose(state, req, cand.tolist(), idle)
        if chosen is not None:
            n_racks = len({topo.rack_of.get(names[i], names[i]) for i, _ in chosen})
            options.append((_key(state, chosen, idle, n_racks), chosen))
    if not options:
        return None
    key, chosen = min(options, key=lambda o: o[0])
    members = tuple((node, _take(state, node, k)) for node, k in chosen)
    return key, GangPlan(members, _why(state, req, chosen, idle, key[1]))


def _choose(state: ClusterState, req: TaskRequest, nodes: list[int],
            idle: np.ndarray) -> list[tuple[int, int]] | None:
    """(node, GPUs taken) per member on the fewest of ``nodes``, or None if they cannot."""
    rank = state.rank
    if req.nodes:
        fit = sorted((int(idle[i]), int(rank[i]), i) for i in nodes
                     if idle[i] >= req.gpus_per_node)
        if len(fit) < req.nodes:
            return None
        # Best fit: nodes whose idle GPUs the member uses most fully come first.
        return [(i, req.gpus_per_node) for _, _, i in fit[: req.nodes]]
    by_size = sorted(nodes, key=lambda i: (-int(idle[i]), int(rank[i]), i))
    total, count = 0, 0
    for i in by_size:
        total += int(idle[i])
        count += 1
        if total >= req.num_gpu:
            break
    else:
        return None
    whole = by_size[: count - 1]
    rest = req.num_gpu - sum(int(idle[i]) for i in whole)
    # The remainder on the node with the fewest idle GPUs that holds it (best fit).
    taken = set(whole)
    last = min((i for i in by_size if i not in taken and idle[i] >= rest),
               key=lambda i: (int(idle[i]), int(rank[i]), i))
    return [(i, int(idle[i])) for i in whole] + [(last, rest)]


def _key(state: ClusterState, chosen: list[tuple[int, int]], idle: np.ndarray,
         n_racks: int) -> tuple:
    """Sort key of a plan: nodes, racks, slowest link (fastest first), GPUs left idle on the
    chosen nodes (fewest first: best fit), then the nodes' ranks."""
    names = state.node_names
    slowest = min((_bandwidth(state, names[a], names[b])
                   for k, (a, _) in enumerate(chosen) for b, _ in chosen[k + 1:]),
                  default=float("inf"))
    left = sum(int(idle[i]) - k for i, k in chosen)
    return (len(chosen), n_racks, -slowest, left, tuple(int(state.rank[i]) for i, _ in chosen))


def _bandwidth(state: ClusterState, a: str, b: str) -> float:
    link = state.topology.link(a, b)
    return float("inf") if link is None else link.bandwidth_gbps


def _take(state: ClusterState, node: int, k: int) -> tuple[int, ...]:
    """The first ``k`` idle GPUs of ``node`` (lowest indices: deterministic)."""
    row = state.gpu_free[node, : int(state.gpu_count[node])]
    return tuple(int(g) for g in np.flatnonzero(row == MILLI_PER_GPU)[:k])


def _why(state: ClusterState, req: TaskRequest, chosen: list[tuple[int, int]],
         idle: np.ndarray, n_racks: int) -> str:
    names = state.node_names
    model = int(state.model[chosen[0][0]])
    model_name = state.model_names[model] if model >= 0 else "?"
    whole = sum(1 for i, k in chosen if k == int(state.gpu_count[i]))
    shape = (f"{req.nodes} x {req.gpus_per_node} GPUs as asked" if req.nodes
             else f"{len(chosen)} nodes, the fewest that hold {req.num_gpu} GPUs")
    last, k = chosen[-1]
    fit = ("" if req.nodes else
           f"; the last member takes {k} of {int(idle[last])} idle GPUs on {names[last]} "
           "(best fit)")
    mix = "mixed models" if req.mixed_models else f"one model ({model_name})"
    return (f"gang: {shape}, {whole} of them whole nodes, in {n_racks} "
            f"rack{'s' if n_racks != 1 else ''}, {mix}{fit}")


def model_mask(state: ClusterState, req: TaskRequest, ok: np.ndarray) -> np.ndarray:
    """``ok`` narrowed to GPU nodes of the request's models (any model when it names none)."""
    n = state.n
    ok = ok & (state.gpu_count[:n] > 0) & (state.model[:n] >= 0)
    if req.gpu_models:
        ids = [state.model_ids[m] for m in req.gpu_models if m in state.model_ids]
        ok &= np.isin(state.model[:n], np.array(ids, np.int64))
    return ok


def _models(state: ClusterState, ok: np.ndarray) -> list[int]:
    """Model ids present among ``ok`` nodes, by name (a deterministic order)."""
    present = {int(m) for m in state.model[: state.n][ok].tolist()}
    return sorted(present, key=lambda m: state.model_names[m])
