"""The GPU catalog's aliases (issue 35): other names node lists and job files give a model.

``V100`` is ``V100M32`` (NVIDIA's V100 has shipped with 32 GB as standard since 2018, and
the Helios trace that names it so describes 32 GB boards); the wire keeps catalog names.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from schemas.gpu_catalog import (
    CATALOG_FILE,
    _parse,
    known_names_and_aliases,
    load_catalog,
    resolve_model,
    unknown_model_problem,
    unknown_name_problem,
)


def _raw() -> dict:
    return json.loads(resources.files("schemas").joinpath(CATALOG_FILE).read_text("utf-8"))


def test_v100_is_an_alias_of_v100m32_with_its_reason():
    entry = next(m for m in _raw()["models"] if m["name"] == "V100M32")
    assert entry["aliases"] == ["V100"]
    assert "32 GB" in entry["aliases_reason"] and "Helios" in entry["aliases_reason"]
    assert load_catalog()["V100M32"].aliases == ("V100",)
    assert "V100" not in load_catalog()  # an alias, not a model of its own


def test_resolve_model_gives_the_catalog_name_or_none():
    assert resolve_model("V100") == "V100M32"
    assert resolve_model("V100M16") == "V100M16" and resolve_model("K80") == "K80"
    assert resolve_model("V100S") is None and resolve_model("v100") is None


def test_an_unknown_name_is_refused_naming_the_known_names_and_aliases():
    assert unknown_name_problem("V100") is None
    problem = unknown_name_problem("V100S")
    assert problem is not None and problem.startswith("unknown GPU model 'V100S' (known: A10,")
    assert problem.endswith("; aliases: V100 = V100M32)")
    assert known_names_and_aliases() in problem


def test_submitted_tasks_keep_catalog_names_only():
    # A task's gpu_models are matched against registered nodes, which carry catalog names.
    problem = unknown_model_problem(["V100"])
    assert problem is not None and "unknown GPU model 'V100'" in problem


def _entry(name: str, **extra: object) -> dict:
    return {"name": name, "memory_mib": 1, "fp32_tflops": 1, "fp16_tflops": 1,
            "mem_bandwidth_gbps": 1, "tdp_w": 1, "throttle_temp_c": 85, "source": "s",
            **extra}


@pytest.mark.parametrize(("models", "says"), [
    ([_entry("A", aliases=["B"])], "'aliases' need an 'aliases_reason'"),
    ([_entry("A", aliases="B", aliases_reason="r")], "'aliases' must be a list"),
    ([_entry("A", aliases=[""], aliases_reason="r")], "'aliases' must be a list"),
    ([_entry("A", aliases=["B"], aliases_reason="r"), _entry("B")],
     "alias 'B' of 'A' is already 'B''s name or alias"),
    ([_entry("A", aliases=["C"], aliases_reason="r"),
      _entry("B", aliases=["C"], aliases_reason="r")],
     "alias 'C' of 'B' is already 'A''s name or alias"),
])
def test_the_catalog_refuses_bad_aliases(models, says):
    with pytest.raises(ValueError, match=says):
        _parse({"models": models})
