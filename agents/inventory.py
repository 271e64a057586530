"""Turn what a telemetry source found into the ``NodeRegistered`` the scheduler reads.

Why a catalog match: NVML names GPUs by product (``NVIDIA A100-SXM4-80GB``,
``Tesla V100-SXM2-32GB``), while submissions constrain GPUs by catalog name
(``ResourceRequest.gpu_models``) and the scheduler scores by catalog figures.
The agent maps each product to its catalog entry (memory size breaks ties such
as V100 16/32 GB) and registers the catalog name as ``GpuSpec.model``; the NVML
product name goes into the node's labels (``gpu-product``). A GPU the catalog
does not know registers under its product name with zero compute figures, and
the agent logs a warning, so the operator adds it to the catalog.
"""

from __future__ import annotations

import logging
import os
import re

from agents.config import NodeSection
from agents.telemetry.base import GpuInfo, NodeInventory
from schemas.events import GpuSpec, NodeRegistered
from schemas.gpu_catalog import GpuModelSpec, load_catalog

log = logging.getLogger(__name__)

AGENT_VERSION = "hetsched-node/0.1"
RUN_TOKENS = 3  # "RTX 2080 Ti": the longest catalog name spelt over several product tokens
_PRODUCT_NOISE = re.compile(r"\b(nvidia|tesla|geforce|quadro)\b", re.IGNORECASE)


def _family(catalog_name: str) -> str:
    """``V100M32`` -> ``V100``: the catalog's memory suffix is not in product names."""
    return re.sub(r"M\d+$", "", catalog_name)


def match_catalog(product: str, memory_mib: int) -> GpuModelSpec | None:
    """The catalog entry for an NVML product name, or None when unknown."""
    catalog = load_catalog()
    if product in catalog:
        return catalog[product]
    tokens = [t for t in re.split(r"[\s\-_]+", _PRODUCT_NOISE.sub(" ", product).upper()) if t]
    # Catalog names of cards whose product name has spaces (``RTX2080Ti`` for "GeForce RTX
    # 2080 Ti") match a run of consecutive tokens; whole tokens only, so "RTX A6000" is not
    # ``RTX6000`` and "RTX A1000" is not ``A100``.
    runs = {"".join(tokens[i:j]) for i in range(len(tokens))
            for j in range(i + 1, min(i + RUN_TOKENS, len(tokens)) + 1)}
    candidates = [spec for spec in catalog.values() if _family(spec.name).upper() in runs]
    if not candidates:
        return None
    return min(candidates, key=lambda spec: abs(spec.memory_mib - memory_mib))


def gpu_spec(info: GpuInfo) -> tuple[GpuSpec, str | None]:
    """The registration entry of one GPU, and its NVML product name if it differs."""
    spec = match_catalog(info.model, info.memory_mib)
    if spec is None:
        log.warning(
            "gpu %d: %r is not in the GPU catalog; registering zero compute figures",
            info.index,
            info.model,
        )
    return (
        GpuSpec(
            index=info.index,
            uuid=info.uuid,
            model=spec.name if spec else info.model,
            memory_mib=max(1, info.memory_mib),
            fp32_tflops=spec.fp32_tflops if spec else 0.0,
            fp16_tflops=spec.fp16_tflops if spec else 0.0,
            mem_bandwidth_gbps=spec.mem_bandwidth_gbps if spec else 0.0,
            power_limit_w=float(info.power_limit_w or (spec.tdp_w if spec else 0.0)),
            numa_node=info.numa_node,
            pcie_bus_id=info.pcie_bus_id,
            nvlink_peers=list(info.nvlink_peers),
            pcie_bandwidth_gbps=info.pcie_bandwidth_gbps,
            nvlink_bandwidth_gbps=info.nvlink_bandwidth_gbps,
        ),
        info.model if spec is not None and spec.name != info.model else None,
    )


def node_registered(node: NodeSection, inventory: NodeInventory) -> NodeRegistered:
    """Build the registration event from config (identity, limits) and the source."""
    gpus: list[GpuSpec] = []
    labels = dict(node.labels)
    for info in inventory.gpus:
        spec, product = gpu_spec(info)
        gpus.append(spec)
        if product:
            labels.setdefault("gpu-product", product)
    if inventory.driver_version:
        labels.setdefault("nvidia-driver", inventory.driver_version)
    cpu_milli = node.cpu_milli or 1000 * (inventory.cpu_count or os.cpu_count() or 1)
    memory_mib = node.memory_mib or inventory.memory_mib or _host_memory_mib()
    return NodeRegistered(
        node_id=node.node_id,
        cell=node.cell,
        pool=node.pool,
        rack=node.rack,
        labels=labels,
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        gpus=gpus,
        agent_version=AGENT_VERSION,
    )


def _host_memory_mib() -> int:
    try:
        return max(1, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))
    except (ValueError, OSError, AttributeError):
        return 1
