"""Progress bars of the long commands (``simulate``, ``replay``, ``export``).

Why one helper: a bar must never get in the way of what a command prints.
It goes to stderr only (stdout carries tables and ``--json`` documents that
scripts parse), and it is off when stderr is not a terminal (CI logs, pipes,
``2>file``) or with ``--no-progress``, so logs never fill with carriage
returns.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tqdm import tqdm


def progress_bar(*, total: int | None, unit: str, desc: str, disable: bool = False) -> tqdm[Any]:
    """A tqdm bar on stderr, disabled by ``disable`` or when stderr is not a TTY."""
    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, leave=False,
                dynamic_ncols=True, unit_scale=True,
                disable=disable or not sys.stderr.isatty())


def advancing(bar: tqdm[Any]) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback that moves ``bar`` (an export's: the total
    is known once the partitions' ends are)."""

    def advance(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
        bar.update(done - bar.n)

    return advance
