"""GPU model catalog: datasheet figures shared by the scheduler and the node side.

It lives in ``schemas`` because both sides need it and may not import each
other: the scheduler's policies score GPUs by compute and bandwidth, and the
node side's simulated GPUs need memory size, power and throttle temperature.
The figures come from ``gpu_models.json`` (one ``source`` citation per model;
G1/G2/G3 of the Alibaba trace are undisclosed, so their figures are stated
assumptions).

Aliases: an entry may list other names files give the model (``aliases``, each list
with its ``aliases_reason``): ``V100`` is ``V100M32``, because NVIDIA has shipped the
V100 with 32 GB as standard since 2018 and the public Helios trace that uses the bare
name describes 32 GB boards. Readers of node lists and job files resolve them
(``resolve_model``); the wire (submitted tasks, registered nodes) keeps catalog names
only, so a task and a node always name a model the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType

CATALOG_FILE = "gpu_models.json"


@dataclass(frozen=True, slots=True)
class GpuModelSpec:
    """Datasheet figures of one GPU model (units in the field names)."""

    name: str
    memory_mib: int
    fp32_tflops: float
    fp16_tflops: float
    mem_bandwidth_gbps: float
    tdp_w: float
    throttle_temp_c: float
    source: str
    aliases: tuple[str, ...] = ()
    """Other names a node list or job file may give this model (module docstring)."""

    @property
    def assumed(self) -> bool:
        """True when the figures are an assumption, not a datasheet value."""
        return self.source.startswith("ASSUMPTION")


def _parse(raw: Mapping[str, object]) -> dict[str, GpuModelSpec]:
    models = raw.get("models")
    if not isinstance(models, list):
        raise ValueError(f"{CATALOG_FILE}: 'models' must be a list")
    out: dict[str, GpuModelSpec] = {}
    for i, item in enumerate(models):
        try:
            spec = GpuModelSpec(
                name=str(item["name"]),
                memory_mib=int(item["memory_mib"]),
                fp32_tflops=float(item["fp32_tflops"]),
                fp16_tflops=float(item["fp16_tflops"]),
                mem_bandwidth_gbps=float(item["mem_bandwidth_gbps"]),
                tdp_w=float(item["tdp_w"]),
                throttle_temp_c=float(item["throttle_temp_c"]),
                source=str(item["source"]),
                aliases=_aliases(item),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{CATALOG_FILE}: model #{i}: bad or missing field: {exc}") from exc
        if spec.name in out:
            raise ValueError(f"{CATALOG_FILE}: model {spec.name!r} listed twice")
        out[spec.name] = spec
    taken: dict[str, str] = {}
    for spec in out.values():
        for alias in spec.aliases:
            if alias in out or alias in taken:
                other = alias if alias in out else taken[alias]
                raise ValueError(f"{CATALOG_FILE}: alias {alias!r} of {spec.name!r} is "
                                 f"already {other!r}'s name or alias")
            taken[alias] = spec.name
    return out


def _aliases(item: Mapping[str, object]) -> tuple[str, ...]:
    """An entry's ``aliases``: non-empty names, stated with an ``aliases_reason``."""
    raw = item.get("aliases", [])
    if not isinstance(raw, list) or not all(isinstance(a, str) and a.strip() == a and a
                                            for a in raw):
        raise ValueError("'aliases' must be a list of non-empty names")
    if raw and not str(item.get("aliases_reason") or "").strip():
        raise ValueError("'aliases' need an 'aliases_reason' (why the name means this model)")
    return tuple(raw)


@cache
def _catalog() -> Mapping[str, GpuModelSpec]:
    text = resources.files(__package__).joinpath(CATALOG_FILE).read_text(encoding="utf-8")
    return MappingProxyType(_parse(json.loads(text)))


def load_catalog() -> dict[str, GpuModelSpec]:
    """Return every known model by name (a fresh dict; the specs are immutable)."""
    return dict(_catalog())


def known_model_names() -> list[str]:
    """Every catalog model name, sorted: what a task's ``gpu_models`` may list."""
    return sorted(_catalog())


@cache
def _alias_map() -> Mapping[str, str]:
    return MappingProxyType({a: spec.name for spec in _catalog().values()
                             for a in spec.aliases})


def resolve_model(name: str) -> str | None:
    """The catalog name for a model named in a node list or job file: ``name`` itself
    when the catalog has it, the model it is an alias of (``V100`` -> ``V100M32``), or
    None when neither."""
    if name in _catalog():
        return name
    return _alias_map().get(name)


def known_names_and_aliases() -> str:
    """``known: A10, ..., V100M32; aliases: V100 = V100M32``, for errors of readers that
    accept aliases (``resolve_model``)."""
    aliases = ", ".join(f"{a} = {m}" for a, m in sorted(_alias_map().items()))
    return f"known: {', '.join(known_model_names())}" + (f"; aliases: {aliases}"
                                                         if aliases else "")


def unknown_name_problem(name: str) -> str | None:
    """Why a model named in a node list or job file is refused (None: a catalog name or
    an alias), naming the known names and aliases."""
    if resolve_model(name) is not None:
        return None
    return f"unknown GPU model {name!r} ({known_names_and_aliases()})"


def unknown_model_problem(names: list[str]) -> str | None:
    """Why ``names`` (a task's allowed models) is refused, or None when all are known.

    A model no catalog entry names can match no registered node's GPUs (agents map
    NVML names to catalog names), so such a request could only ever be refused as
    "gpu model not allowed" after it was queued; submitters are told at once instead,
    with the names they could have meant.
    """
    unknown = [n for n in names if n not in _catalog()]
    if not unknown:
        return None
    listed = ", ".join(repr(n) for n in unknown)
    return (f"unknown GPU model{'s' if len(unknown) > 1 else ''} {listed} "
            f"(known: {', '.join(known_model_names())})")


def get_model(name: str) -> GpuModelSpec:
    """Return one model's figures; ``KeyError`` names the known models if absent."""
    try:
        return _catalog()[name]
    except KeyError:
        known = ", ".join(sorted(_catalog()))
        raise KeyError(f"unknown GPU model {name!r} (known: {known})") from None
