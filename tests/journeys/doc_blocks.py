"""The shell blocks of README.md and docs/*.md, and what each one's marker asks for.

Every fenced block whose language is empty, ``sh``, ``bash`` or ``shell`` is a
command block, and the line right above its fence must say what the docs test
does with it (an HTML comment, invisible on the rendered page):

``<!-- doc-test: run [cluster] [repo] -->``
    Run the whole block with bash (``-e``, ``pipefail``); it must exit 0.
``<!-- doc-test: serve [cluster] [repo] -->``
    Each line is a long-running command (a demo, a node): it must still be up
    after a few seconds and stop cleanly on Ctrl-C (SIGINT).
``<!-- doc-test: skip REASON -->``
    Not run: it needs what CI lacks (one of :data:`SKIP_REASONS`). Its
    structure is still checked, like every block's.
``<!-- doc-test: file NAME -->`` (above any block)
    The block's text is a file the following commands of the same document
    use (``task.json``, ``objectives.json``): written into the scratch folder.

``cluster`` runs the block against a running default cluster (a worker and
simulated nodes), ``repo`` from the repository root instead of a scratch
folder of the document. Blocks that are diagrams or sample output use the
language ``text``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

COMMAND_LANGUAGES = ("", "sh", "bash", "shell")

SKIP_REASONS = {
    "docker": "needs a Docker engine; the compose files have their structural tests",
    "systemd": "needs systemd; the unit is checked by reading",
    "external-cluster": "names hosts of a production Kafka cluster",
    "secured-broker": "needs the TLS/SASL broker and its secret files (tests/security)",
    "install": "installs into system folders",
    "test-command": "is the test command itself, which CI runs",
    "benchmark": "a benchmark of minutes; its --help and flags are checked",
}

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
_MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<what>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its marker words."""

    path: Path
    line: int
    language: str
    text: str
    marker: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def is_command(self) -> bool:
        return self.language in COMMAND_LANGUAGES

    @property
    def mode(self) -> str:
        return self.marker[0] if self.marker else ""

    def has(self, word: str) -> bool:
        return word in self.marker[1:]


def documents() -> list[Path]:
    """The documents whose commands users copy: README.md and docs/*.md."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` in order, each with the marker above it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, start = len(fence["indent"]), i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        above = _MARKER.match(lines[start - 1]) if start else None
        marker = tuple(above["what"].split()) if above else ()
        out.append(Block(path, start + 1, fence["lang"], "\n".join(body) + "\n", marker))
        i += 1
    return out


def command_lines(text: str) -> list[list[str]]:
    """Each simple command of a shell block as argv words, without environment
    assignments, redirections, comments and here-document bodies."""
    joined = re.sub(r"\\\n\s*", " ", text)
    commands: list[list[str]] = []
    heredoc_end: str | None = None
    for line in joined.splitlines():
        if heredoc_end is not None:
            if line.strip() == heredoc_end:
                heredoc_end = None
            continue
        heredoc = re.search(r"<<-?\s*'?\"?(\w+)", line)
        if heredoc:
            heredoc_end = heredoc.group(1)
            line = line[:heredoc.start()]
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        skip_next = False
        for token in lexer:
            if skip_next:
                skip_next = False
                continue
            if token in (";", "&&", "||", "|", "&"):
                if words:
                    commands.append(words)
                words = []
            elif token in (">", ">>", "<", "2>", "&>"):
                skip_next = True
            elif not words and re.fullmatch(r"[A-Za-z_]\w*=.*", token):
                continue  # VAR=value before the command
            else:
                words.append(token)
        if words:
            commands.append(words)
    return commands
