"""Print or apply the Kafka ACLs of hetsched's roles (see docs/security.md).

    hetsched acl print                              the role table
    hetsched acl print --principal-map FILE         every ACL for the principals in FILE
    hetsched acl apply --principal-map FILE         create them through the admin API

FILE is YAML with a ``roles`` mapping (role -> list of ``User:<name>``), the same
file as ``HETSCHED_SECURITY_CONFIG``. ``apply`` authenticates like every client
(``KAFKA_SECURITY_PROTOCOL``, ``KAFKA_SASL_*``), as a principal allowed to alter
ACLs (a super user); creating an ACL that exists already is a no-op in Kafka,
so ``apply`` is idempotent. It never deletes ACLs.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["print", "apply"])
    parser.add_argument("--principal-map", type=Path, help="YAML with roles: {role: [User:x]}")
    parser.add_argument(
        "--app-id", default=None, help="scheduler Faust app id (default HETSCHED_APP_ID)"
    )
    parser.add_argument("--bootstrap", default=None, help="host:port list (default: env)")


def load_principals(path: Path) -> dict[str, list[str]]:
    """The ``roles`` mapping of a principal-map file."""
    import yaml

    from schemas.command_line import CommandError, yaml_problem

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise CommandError(f"--principal-map {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise CommandError(f"--principal-map {path}: not YAML: {yaml_problem(exc)}") from None
    roles = data.get("roles") if isinstance(data, dict) else None
    if not isinstance(roles, dict):
        raise CommandError(f"--principal-map {path}: expected a 'roles' mapping "
                           "(role -> [User:name, ...])")
    return {str(role): [str(p) for p in principals or ()] for role, principals in roles.items()}


def run(args: argparse.Namespace) -> int:
    import asyncio
    import os

    from schemas.command_line import CommandError
    from streams.security.acls import DEFAULT_SCHEDULER_APP_ID, bindings, role_table

    app_id = args.app_id or os.environ.get("HETSCHED_APP_ID", "") or DEFAULT_SCHEDULER_APP_ID
    if args.principal_map is None:
        if args.action == "apply":
            raise CommandError("apply needs --principal-map FILE")
        print("| Role | Resource | Name | Operations |\n| --- | --- | --- | --- |")
        for role, resource, name, ops in role_table(app_id=app_id):
            print(f"| {role} | {resource} | `{name}` | {ops} |")
        return 0
    try:
        rows = bindings(load_principals(args.principal_map), app_id=app_id)
    except ValueError as exc:  # an unknown role, a principal that is not User:<name>
        raise CommandError(f"--principal-map {args.principal_map}: {exc}") from None
    if args.action == "print":
        for row in rows:
            pattern = row.pattern.name
            print(
                f"{row.principal}\t{row.resource.name}\t{pattern}:{row.name}\t"
                f"{row.operation.name}\tALLOW"
            )
        return 0
    from schemas.kafka import bootstrap_servers
    from streams.security.apply import apply_acls

    created = asyncio.run(apply_acls(args.bootstrap or bootstrap_servers(), rows))
    print(f"hetsched acl: {created} ACL bindings applied")
    return 0
