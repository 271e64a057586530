"""The node side deploys alone: ``agents`` may import ``schemas``, never ``streams``."""

from __future__ import annotations

import ast
from pathlib import Path

import agents

ROOT = Path(agents.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_module_of_agents_imports_streams() -> None:
    offenders = {
        str(path.relative_to(ROOT.parent)): sorted(
            n for n in _imports(path) if n == "streams" or n.startswith("streams.")
        )
        for path in ROOT.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
