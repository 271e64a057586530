"""The decision packages depend one way: core <- policies <- profiles.

Why: the core defines the interfaces (``streams.core.policy``: the verdict, the
nodes view, the policy protocol; ``streams.core.fit``: feasibility) that policies
implement, and ``streams.profiles`` compiles configuration into schedulers by
looking policies up by name. A core module that imported a policy, or a policy
that imported the simulator, would tie the pure core to its plug-ins (and the
compiled core of issue 36 to Python policy code). Imports are read from the
source (type-only ones included: they are the same tie), so a new arrow the wrong
way fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ALLOWED = {
    "streams.core": {"streams.core"},
    "streams.policies": {"streams.core", "streams.policies"},
    "streams.profiles": {"streams.core", "streams.policies", "streams.profiles"},
}
"""Package -> the ``streams`` packages its modules may import (schemas is below all)."""


def imported_streams_packages(path: Path) -> dict[str, int]:
    """``streams.<package>`` imported by the module at ``path`` -> the first line doing it."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "streams":
                names = [f"streams.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "streams" and len(parts) > 1:
                found.setdefault(".".join(parts[:2]), node.lineno)
    return found


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package.replace(".", "/")).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_decision_package_imports_only_the_packages_below_it(package: str) -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {imported}"
        for path in _modules(package)
        for imported, line in imported_streams_packages(path).items()
        if imported not in ALLOWED[package]
    ]
    assert _modules(package), f"{package} has no modules"
    assert wrong == []


def test_the_reader_sees_an_import_the_wrong_way(tmp_path: Path) -> None:
    """The check itself: a type-only import of a policy from a core module is found."""
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "from streams.core.request import TaskRequest\n"
        "if TYPE_CHECKING:\n"
        "    from streams.policies.fgd import Fgd\n"
        "from streams import sim\n"
    )
    assert imported_streams_packages(module) == {
        "streams.core": 2, "streams.policies": 4, "streams.sim": 5}


def test_no_shipped_module_imports_the_test_oracles() -> None:
    """The Python twins of the compiled core (tests/oracle) are for tests only: production
    runs one implementation, the core's (docs/core.md)."""
    wrong = []
    for package in ("streams", "schemas", "agents", "bench"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                         else [a.name for a in node.names] if isinstance(node, ast.Import)
                         else [])
                wrong += [f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
                          for name in names if name == "tests" or name.startswith("tests.")]
    assert wrong == []
