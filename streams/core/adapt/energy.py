"""Energy: a per-model power model, and what consolidation saves.

Power of a GPU at utilisation ``u`` (0..1): ``idle + (tdp - idle) * u``, idle
being ``IDLE_SHARE`` of the model's TDP (typical of datacenter GPUs, 15-25%).
A powered-down server draws nothing; a powered-on idle one draws idle power on
every GPU plus ``HOST_IDLE_W``. Consolidation off-peak packs work onto fewer
servers so the others can power down; ``node_power_w`` lets the simulator and
the benchmark integrate energy over time.
"""

from __future__ import annotations

IDLE_SHARE = 0.2
HOST_IDLE_W = 150.0


def gpu_power_w(tdp_w: float, util: float) -> float:
    u = min(1.0, max(0.0, util))
    return tdp_w * (IDLE_SHARE + (1.0 - IDLE_SHARE) * u)


def node_power_w(tdp_w: float, utils: list[float], powered: bool) -> float:
    """One server's draw: its GPUs at their utilisation plus the host, 0 when off."""
    if not powered:
        return 0.0
    return HOST_IDLE_W + sum(gpu_power_w(tdp_w, u) for u in utils)


def perf_per_watt(fp32_tflops: float, bandwidth_gbps: float, tdp_w: float, kind: str) -> float:
    """Efficiency of a model for a kind of work: compute or bandwidth per watt."""
    if tdp_w <= 0:
        return 0.0
    return (bandwidth_gbps / 1000.0 if kind == "data" else fp32_tflops) / tdp_w
