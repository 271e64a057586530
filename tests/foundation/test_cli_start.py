"""The command lines import only what the command run needs.

Why it matters: ``hetsched --help`` took about a second before printing anything,
because every sub-command's module (and with them pydantic's ~40 message models,
numpy and Faust) was imported to build the parser. Each case runs in a fresh
interpreter and reads ``sys.modules`` after the command, so an import that creeps
back fails here, whatever the machine's speed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agents.cli import COMMANDS as NODE_COMMANDS
from schemas.command_line import Commands
from streams.cli import COMMANDS as SCHEDULER_COMMANDS

HEAVY = ("pydantic", "numpy", "faust", "aiokafka", "schemas.events")
"""Packages a bare ``--help`` must not import."""

PROGRAMS = {"streams.cli": SCHEDULER_COMMANDS, "agents.cli": NODE_COMMANDS}


def _modules_after(program: str, *argv: str) -> set[str]:
    """The modules loaded once ``program``'s ``main(argv)`` has run (its exit ignored)."""
    return _loaded(
        "import contextlib, io\n"
        f"from {program} import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({list(argv)!r})\n"
    )


def _loaded(script: str) -> set[str]:
    """The modules loaded once ``script`` has run in a fresh interpreter."""
    script += "import json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return set(json.loads(proc.stdout.splitlines()[-1]))


def _command_modules(commands: Commands, loaded: set[str]) -> set[str]:
    return {module for module, _ in commands.values() if module in loaded}


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_help_imports_no_command_and_nothing_heavy(program: str) -> None:
    loaded = _modules_after(program, "--help")
    assert _command_modules(PROGRAMS[program], loaded) == set()
    heavy = {m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)}
    assert heavy == set(), f"{program} --help imported {sorted(heavy)}"


@pytest.mark.parametrize(
    ("program", "command"),
    [(program, command) for program, table in PROGRAMS.items() for command in table],
)
def test_a_command_imports_its_own_module_and_no_other_commands(
    program: str, command: str
) -> None:
    """Only the command's module is loaded, with the commands it imports itself
    (``nodes`` shares ``status``'s table code)."""
    table = PROGRAMS[program]
    own = _command_modules(table, _loaded(f"import {table[command][0]}\n"))
    loaded = _modules_after(program, command, "--help")
    assert table[command][0] in own
    assert _command_modules(table, loaded) == own


def test_an_unknown_command_is_refused_without_importing_any() -> None:
    script = (
        "import sys\n"
        "from streams.cli import main\n"
        "try:\n"
        "    main(['shedule'])\n"
        "except SystemExit as exc:\n"
        "    print(exc.code, any(m.startswith('streams.commands.') for m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.stdout.split() == ["2", "False"]
    assert "invalid choice: 'shedule'" in proc.stderr


def test_the_package_builds_no_message_model_until_one_is_used() -> None:
    script = (
        "import json, sys\n"
        "import schemas\n"
        "before = 'schemas.events' in sys.modules\n"
        "from schemas import EVENT_MODELS, TaskSubmitted, registered, message_model\n"
        "from schemas.events.envelope import _MESSAGES\n"
        "built = len(_MESSAGES)\n"
        "model = message_model(TaskSubmitted.EVENT_TYPE, TaskSubmitted.EVENT_VERSION)\n"
        "print(json.dumps([before, built, len(_MESSAGES), len(registered()) - len(EVENT_MODELS),"
        " model.__name__]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    before, built, after, unregistered, name = json.loads(proc.stdout)
    assert (before, built, after, name) == (False, 0, 1, "TaskSubmittedV1Message")
    assert unregistered == 0


def test_replays_help_does_not_import_the_audit_path() -> None:
    """``hetsched replay``'s options live apart from its work (``replay_run``), which
    imports the worker's step, the codec and every event model."""
    loaded = _modules_after("streams.cli", "replay", "--help")
    assert "streams.commands.replay" in loaded
    assert {"streams.commands.replay_run", "streams.replay", "schemas.events"} & loaded == set()
