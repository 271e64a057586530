"""Every document reference the project gives a reader resolves inside the repository.

Why: `hetsched simulate --help`, BENCHMARKS.md and the policies' docstrings pointed at
docs/packing-benchmark.md, which the repository did not have (the text lived outside
it). These checks read the reader-facing texts (README.md, docs/*.md, BENCHMARKS.md,
the simulator's --help, and the code's pointers to docs/) and require every relative
markdown link (and its #anchor), every `docs/NAME.md` and every `§N` to name a file,
and a heading or numbered section, that exist. A bare `§N` means a section of the
document named last before it in the same paragraph (in code: in the same file), else
of the text itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from streams import cli

REPO_ROOT = Path(__file__).resolve().parents[2]
MARKDOWN_FILES = sorted(
    [REPO_ROOT / "README.md", REPO_ROOT / "BENCHMARKS.md", *(REPO_ROOT / "docs").glob("*.md")]
)
CODE_DIRS = ("streams", "bench", "agents", "schemas")

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
DOC_NAME = re.compile(r"(?<![\w/.-])((?:\.\./)?(?:docs/)?[\w.-]+\.md)\b")
SECTION = re.compile(r"§\s?(\d+)")
NUMBERED_HEADING = re.compile(r"^#{1,6}\s+(?:§\s?)?(\d+)[.)]?\s", re.MULTILINE)
CODE_DOC_POINTER = re.compile(r"(?<![\w/.-])((?:docs/)?packing-benchmark\.md|docs/[\w.-]+\.md)")


@dataclass(frozen=True)
class Reference:
    """One reference found in a text: where it is, what it names, how to resolve it."""

    source: str
    target: str
    section: int | None
    anchor: str | None = None


def _strip_code_blocks(text: str) -> str:
    """Fenced code is commands and output, not references to follow."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _resolve(name: str, base: Path) -> Path:
    """A `docs/...` or top-level name from the repository root, anything else from ``base``."""
    if name.startswith("docs/") or (REPO_ROOT / name).exists():
        return REPO_ROOT / name
    return (base / name).resolve()


def _sections(path: Path) -> set[int]:
    return {int(n) for n in NUMBERED_HEADING.findall(path.read_text(encoding="utf-8"))}


def _anchors(path: Path) -> set[str]:
    """The anchors a markdown renderer gives the headings (GitHub's rule: lower case,
    punctuation dropped, spaces to hyphens)."""
    text = _strip_code_blocks(path.read_text(encoding="utf-8"))
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def _prose_references(source: str, text: str, base: Path, itself: Path | None,
                      chunks: list[str]) -> list[Reference]:
    """Document names and §N in each chunk (a paragraph, or a whole file of code)."""
    refs: list[Reference] = []
    for chunk in chunks:
        tokens = sorted(
            [(m.start(), "doc", m.group(1)) for m in DOC_NAME.finditer(chunk)]
            + [(m.start(), "section", m.group(1)) for m in SECTION.finditer(chunk)]
        )
        last_doc: Path | None = itself
        for _, kind, value in tokens:
            if kind == "doc":
                last_doc = _resolve(value, base)
                refs.append(Reference(source, str(last_doc), None))
            else:
                target = str(last_doc) if last_doc is not None else "(no document named)"
                refs.append(Reference(source, target, int(value)))
    return refs


def markdown_references(path: Path, root: Path = REPO_ROOT) -> list[Reference]:
    text = _strip_code_blocks(path.read_text(encoding="utf-8"))
    source = str(path.relative_to(root))
    refs = []
    for match in LINK.finditer(text):
        link, _, anchor = (match.group(1) or match.group(2)).partition("#")
        if re.match(r"^[a-z]+:", link):
            continue  # an absolute URL
        target = (path.parent / link).resolve() if link else path
        refs.append(Reference(source, str(target), None, anchor or None))
    prose = re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*\.(?:csv|png|json)`", "", text))
    paragraphs = re.split(r"\n\s*\n", prose)
    # Output files the commands write are named like documents; they are not references.
    paragraphs = [re.sub(r"(?:DIR/|out/)?summary\.md", "", p) for p in paragraphs]
    refs += _prose_references(source, prose, path.parent, path, paragraphs)
    return refs


def simulate_help() -> str:
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    return subparsers.choices["simulate"].format_help()  # type: ignore[attr-defined]


def help_references() -> list[Reference]:
    text = simulate_help().replace("DIR/summary.md", "")
    return _prose_references("hetsched simulate --help", text, REPO_ROOT, None, [text])


def code_references() -> list[Reference]:
    refs = []
    for folder in CODE_DIRS:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if not CODE_DOC_POINTER.search(text):
                continue
            source = str(path.relative_to(REPO_ROOT))
            for match in CODE_DOC_POINTER.finditer(text):
                refs.append(Reference(source, str(REPO_ROOT / match.group(1)), None))
            tokens = sorted(
                [(m.start(), "doc", m.group(1)) for m in CODE_DOC_POINTER.finditer(text)]
                + [(m.start(), "section", m.group(1)) for m in SECTION.finditer(text)]
            )
            last_doc: str | None = None
            for _, kind, value in tokens:
                if kind == "doc":
                    last_doc = str(REPO_ROOT / value)
                else:
                    refs.append(Reference(source, last_doc or "(no document named)", int(value)))
    return refs


def _broken(refs: list[Reference]) -> list[str]:
    problems = []
    for ref in refs:
        target = Path(ref.target)
        if not target.exists():
            problems.append(f"{ref.source}: {ref.target} does not exist")
        elif ref.section is not None and ref.section not in _sections(target):
            problems.append(f"{ref.source}: {target.name} has no section {ref.section}")
        elif ref.anchor is not None and ref.anchor not in _anchors(target):
            problems.append(f"{ref.source}: {target.name} has no heading #{ref.anchor}")
    return sorted(set(problems))


@pytest.mark.parametrize("path", MARKDOWN_FILES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_link_document_and_section_a_markdown_file_names_exists(path: Path) -> None:
    assert _broken(markdown_references(path)) == []


def test_the_simulator_help_names_a_packing_document_and_sections_that_exist() -> None:
    refs = help_references()
    assert any(r.target.endswith("docs/packing-benchmark.md") for r in refs)
    assert _broken(refs) == []


def test_every_pointer_from_the_code_to_a_document_and_its_sections_resolves() -> None:
    refs = code_references()
    assert any(r.section is not None for r in refs)  # the policies cite sections
    assert _broken(refs) == []


def test_the_checker_catches_a_missing_file_and_a_missing_section(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# Doc\n\n## 1. First one\n\nSee §1 and §2, [gone](gone.md), "
                   "[here](#1-first-one) and [there](#second).\n")
    refs = markdown_references(doc, root=tmp_path)
    assert _broken(refs) == sorted({"doc.md: doc.md has no section 2",
                                    "doc.md: doc.md has no heading #second",
                                    f"doc.md: {(tmp_path / 'gone.md').resolve()} does not exist"})
