"""docs/security.md's attack table points at tests that exist.

Every ``tests/...py::name`` the page cites must be a test function of that file, so a
renamed or deleted test cannot leave a row claiming a proof that is gone. Rows for
holes being closed on other branches cite only their test file; they are listed in
:data:`PENDING` with why, until their tests land (then remove them here and cite the
tests by name).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "security.md"
CITED = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
CITED_FILE = re.compile(r"`(tests/attacks/[\w/]+\.py)`")

PENDING: dict[str, str] = {}
"""Rows whose tests are still on another branch (file -> why); none today."""


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {node.name for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test_")}


def test_every_test_docs_security_cites_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    cited = sorted(set(CITED.findall(text)))
    assert len(cited) >= 15, "the attack table is missing or no longer cites tests"
    missing = [f"{path}::{name}" for path, name in cited
               if not (REPO_ROOT / path).is_file()
               or name not in _test_names(REPO_ROOT / path)]
    assert not missing, f"docs/security.md cites tests that do not exist: {missing}"


def test_a_cited_attack_file_without_a_test_name_is_one_of_the_pending_rows() -> None:
    text = DOC.read_text(encoding="utf-8")
    by_name = {path for path, _ in CITED.findall(text)}
    bare = {path for path in CITED_FILE.findall(text)
            if path not in by_name and (REPO_ROOT / path).suffix == ".py"}
    unexplained = sorted(
        path for path in bare
        if path not in PENDING and not (REPO_ROOT / path).is_file())
    assert not unexplained, f"docs/security.md cites missing test files: {unexplained}"
    for path in PENDING:
        assert f"`{path}` (pending)" in text, f"the pending row for {path} is gone"
