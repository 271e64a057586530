"""Which account a node's process tasks run as.

Why: a decision makes the node run a command, and the node usually runs as root
(systemd, the demo, CI). A task started as the node's own user was therefore a
tenant's program running as root whenever the operator had not configured a
sandbox user. A node running as root now starts every process task as an
unprivileged account: ``executor.sandbox.user`` when set, else
``executor.run_as`` (``nobody`` by default, an account every Debian/Ubuntu
machine and CI image has). ``executor.run_as: root`` is the one explicit way to
run tasks as root. No account is created here: a name that does not exist stops
the node at start with one line naming the setting, instead of failing every
task later.

A node that does not run as root cannot switch users; its tasks run as its own
(already unprivileged) user, as before, unless a sandbox user is configured.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from dataclasses import dataclass

from agents.config import ExecutorSection

ROOT_UID = 0


@dataclass(frozen=True)
class TaskAccount:
    """The account a task's processes run as (its uid, primary group, no other groups)."""

    name: str
    uid: int
    gid: int


class TaskUserError(ValueError):
    """The configured task account cannot be used; the message names the setting."""


Lookup = Callable[[str], pwd.struct_passwd]


def _account(setting: str, name: str, lookup: Lookup) -> pwd.struct_passwd:
    try:
        return lookup(name)
    except KeyError:
        raise TaskUserError(
            f"{setting}: user {name!r} does not exist on this machine (process tasks run "
            "as this unprivileged account; create it or name an existing one"
            + (", or set executor.run_as=root to run tasks as root)"
               if setting == "executor.run_as" else ")")
        ) from None


def task_account(
    executor: ExecutorSection,
    *,
    euid: int | None = None,
    lookup: Lookup = pwd.getpwnam,
) -> TaskAccount | None:
    """The account process tasks run as, or None for the node's own user.

    ``euid`` is the node's effective uid (``os.geteuid()`` unless given, for tests).
    Raises :class:`TaskUserError` naming the setting and its value when the account
    does not exist, or when the sandbox user is root (a sandbox never runs tasks as
    root; ``executor.run_as: root`` is the explicit opt-out).
    """
    sandbox_user = executor.sandbox.user if executor.sandbox is not None else None
    if sandbox_user is not None:
        entry = _account("executor.sandbox.user", sandbox_user, lookup)
        if entry.pw_uid == ROOT_UID:
            raise TaskUserError(
                f"executor.sandbox.user: {sandbox_user!r} is root; a sandbox runs tasks as an "
                "unprivileged account (executor.run_as=root without a sandbox user opts out)"
            )
        return TaskAccount(entry.pw_name, entry.pw_uid, entry.pw_gid)
    if (os.geteuid() if euid is None else euid) != ROOT_UID:
        return None  # cannot switch users: tasks run as the node's own, unprivileged user
    entry = _account("executor.run_as", executor.run_as, lookup)
    if entry.pw_uid == ROOT_UID:
        return None  # executor.run_as: root, the documented opt-out
    return TaskAccount(entry.pw_name, entry.pw_uid, entry.pw_gid)
