"""The shape both command-line programs share (``hetsched`` and ``hetsched-node``).

Each sub-command lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; a program is a table mapping names to those modules, so
adding a command is one line in its table. A run imports only the module of the
command it runs (:func:`main`): ``--help`` imports none, so it prints at once, and
one command never pays for another's imports (Faust, numpy, pydantic models).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterable

Commands = dict[str, tuple[str, str]]
"""name -> (module, one-line help)."""

USAGE_ERROR = 2
"""Exit status of a command refused for its input (as argparse exits on a bad option)."""
SIGPIPE_EXIT = 141
"""Exit status when the reader of our output went away (128 + SIGPIPE), as the shell
reports for a tool killed by the signal."""


class CommandError(Exception):
    """The user's input to a command is wrong (an argument, a file it names): the message
    says which and why. ``run_command`` prints it as one line and exits with
    :data:`USAGE_ERROR`; a traceback is kept for what is a bug."""


Limit = tuple[str, object, bool, str]
"""(flag, value given, whether it is in range, what it must be): one argument's range check."""


def out_of_range(limits: Iterable[Limit]) -> str | None:
    """The one line that names the first argument outside its range, or None.

    Why here and not in argparse types: a range often depends on the mode or on another
    argument, and every command says it the same way (``--jobs 0: must be at least
    1``); a command raises it as a :class:`CommandError` (or prints it, in the
    simulator's older ``error:`` style).
    """
    for flag, value, ok, what in limits:
        if not ok:
            return f"{flag} {value}: must be {what}"
    return None


def check_limits(limits: Iterable[Limit]) -> None:
    """Raise :class:`CommandError` naming the first argument outside its range."""
    problem = out_of_range(limits)
    if problem is not None:
        raise CommandError(problem)


def build_parser(
    prog: str, description: str, commands: Commands, only: str | None = None
) -> argparse.ArgumentParser:
    """One sub-parser per command, wired to its module's ``run``.

    ``only`` names the one command whose module is imported and whose arguments are
    added (``""``: none of them); the others get a sub-parser with their one-line
    help, enough for the list and for argparse to refuse an unknown name. Without
    it every module is imported (the full parser the documentation tests check
    commands against).
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module_name, help_text) in commands.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text)
            continue
        module = importlib.import_module(module_name)
        cmd = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(prog: str, description: str, commands: Commands, argv: list[str] | None) -> int:
    """Run the command ``argv`` names, importing that command's module alone.

    The program's own options are only ``-h``, so the command is the first
    argument; when it is not a known command (``--help``, a typo) no module is
    imported and argparse prints the list or the refusal.
    """
    args = sys.argv[1:] if argv is None else argv
    chosen = args[0] if args and args[0] in commands else ""
    return run_command(build_parser(prog, description, commands, only=chosen), args)


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse ``argv`` and run the chosen command, returning its exit status.

    A :class:`CommandError` (bad input) prints one line and exits 2. A one-shot
    command against a Kafka cluster that does not answer prints one line naming the
    address and exits 1, with no traceback (long-running commands wait for the
    cluster instead); a refused login (SASL or TLS) is said to be one, with the
    principal and the mechanism, and so is a request the brokers' ACLs refused, with
    the principal and what it asked for (exit 1). Output cut short by its reader
    (``hetsched status | head``) ends quietly with 141, as a tool killed by SIGPIPE
    does: a ``BrokenPipeError`` is an ``OSError`` and was reported as an unreachable
    broker. Any other error propagates.
    """
    args = parser.parse_args(argv)
    from schemas.malloc_tuning import keep_large_blocks_in_heap

    keep_large_blocks_in_heap()  # after parsing: --help and refusals load nothing more
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush
        # cannot raise a second time and print a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return SIGPIPE_EXIT
    except CommandError as exc:
        print(f"{parser.prog} {args.command}: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except Exception as exc:
        import asyncio

        from schemas.kafka import (
            LoginRefused,
            NotAuthorized,
            bootstrap_servers,
            is_unreachable,
            not_authorized,
            refused_login,
            unreachable_message,
        )

        refused = exc if isinstance(exc, LoginRefused | NotAuthorized) else not_authorized(exc)
        if refused is not None:
            print(f"{parser.prog} {args.command}: {refused}", file=sys.stderr)
            return 1
        if not is_unreachable(exc):
            raise
        bootstrap = bootstrap_servers()
        why = asyncio.run(refused_login(bootstrap)) or unreachable_message(bootstrap, exc)
        print(f"{parser.prog} {args.command}: {why}", file=sys.stderr)
        return 1


def yaml_problem(exc: Exception) -> str:
    """A YAML error on one line, what and where (PyYAML's own text spans several), for
    the one-line messages of bad input."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(exc).split())
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
