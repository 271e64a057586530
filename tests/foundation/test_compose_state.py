"""Both compose files are valid Compose, and every service of our image can write its
state (issue 34, defect 3).

No Docker engine runs here, so what ``docker compose up`` would find out is read from
the files: the compose specification, by ``check-jsonschema``'s vendored compose-spec
schema (a validator this project did not write); and for each service started from
``docker/Dockerfile``, every path it writes (the worker's ``HETSCHED_DATA_DIR``, a node's
``--state-dir``) must be absolute, on a writable named volume, and a directory the
Dockerfile creates and gives to the user the service runs as. A fresh named volume
takes the ownership of the image's directory it is mounted on; a relative path lands
in ``/app``, which root owns: before the fix the ``nodes`` service could not create its
state directory.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
COMPOSE_FILES = [DOCKER / "docker-compose.yml", DOCKER / "docker-compose.secure.yml"]


def test_both_compose_files_follow_the_compose_specification() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
         *map(str, COMPOSE_FILES)],
        capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


class Dockerfile:
    """What the image gives each path: who owns the directories it creates, the user
    its processes run as, and its environment (only what this test needs)."""

    def __init__(self, text: str) -> None:
        self.user = "root"
        self.workdir = PurePosixPath("/")
        self.env: dict[str, str] = {}
        self.created: set[PurePosixPath] = set()
        self.owner: dict[PurePosixPath, str] = {}
        for instruction, args in _instructions(text):
            if instruction == "USER":
                self.user = args.split(":")[0]
            elif instruction == "WORKDIR":
                self.workdir = self.workdir / args
                self.created.add(self.workdir)
            elif instruction == "ENV":
                words = shlex.split(args)
                if len(words) == 2 and "=" not in words[0]:
                    words = [f"{words[0]}={words[1]}"]
                self.env.update(w.split("=", 1) for w in words)
            elif instruction == "RUN":
                for command in args.split("&&"):
                    self._run(shlex.split(command))

    def _run(self, argv: list[str]) -> None:
        if not argv:
            return
        if argv[0] == "mkdir":
            self.created.update(PurePosixPath(p) for p in argv[1:] if not p.startswith("-"))
        elif argv[0] == "chown":
            operands = [a for a in argv[1:] if not a.startswith("-")]
            owner = operands[0].split(":")[0]
            self.owner.update((PurePosixPath(p), owner) for p in operands[1:])

    def gives(self, path: PurePosixPath, user: str) -> bool:
        return path in self.created and self.owner.get(path) == user


def _instructions(text: str) -> list[tuple[str, str]]:
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1] + " " + line
        else:
            lines.append(line)
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _our_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose["services"].items()
            if "build" in s and Path(s["build"]["dockerfile"]).name == DOCKERFILE.name}


def _argv(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def written_paths(service: dict[str, Any], image: Dockerfile) -> dict[str, str]:
    """What each program of ours writes, as the service starts it: {what: path}."""
    argv = _argv(service)
    if argv[:2] == ["hetsched", "worker"]:
        env = {**image.env, **_env(service)}
        return {"HETSCHED_DATA_DIR": env.get("HETSCHED_DATA_DIR", "var/worker")}
    if argv[:1] == ["hetsched-node"]:
        state = argv[argv.index("--state-dir") + 1] if "--state-dir" in argv else None
        return {"--state-dir": state or "var/hetsched-node"}  # agents/config.py default
    return {}


def _mounts(service: dict[str, Any]) -> list[tuple[str, PurePosixPath, bool]]:
    """(source, target, read-only) of each volume, short or long syntax."""
    out = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            parts = volume.split(":")
            out.append((parts[0], PurePosixPath(parts[1]), "ro" in parts[2:]))
        else:
            out.append((volume.get("source", ""), PurePosixPath(volume["target"]),
                        bool(volume.get("read_only"))))
    return out


def state_problems(compose: dict[str, Any], image: Dockerfile) -> list[str]:
    """Why a service of our image could not keep its state, one line each."""
    named = set(compose.get("volumes") or {})
    problems = []
    for name, service in _our_services(compose).items():
        user = str(service.get("user", image.user)).split(":")[0]
        for what, raw in written_paths(service, image).items():
            path = PurePosixPath(raw)
            where = f"{name} writes {what}={raw}"
            mounts = [(s, t, ro) for s, t, ro in _mounts(service)
                      if path == t or t in path.parents]
            if not path.is_absolute():
                problems.append(f"{where}: a relative path, in the image's {image.workdir}")
            elif len(mounts) != 1:
                problems.append(f"{where}: on {len(mounts)} volumes, not 1")
            else:
                [(source, target, read_only)] = mounts
                if source not in named:
                    problems.append(f"{where}: {source} is not a named volume of the file")
                if read_only:
                    problems.append(f"{where}: mounted read-only")
                if not image.gives(target, user):
                    problems.append(f"{where}: the Dockerfile must create {target} and chown "
                                    f"it to {user} (a fresh named volume takes its owner)")
    return problems


@pytest.mark.parametrize("compose_file", COMPOSE_FILES, ids=lambda p: p.name)
def test_every_path_a_service_writes_is_a_named_volume_its_user_owns(compose_file: Path) -> None:
    compose = yaml.safe_load(compose_file.read_text())
    image = Dockerfile(DOCKERFILE.read_text())
    assert state_problems(compose, image) == []
    writers = {name for name, service in _our_services(compose).items()
               if written_paths(service, image)}
    assert {"scheduler", "nodes"} <= writers


def test_the_check_finds_a_relative_state_dir_and_a_root_owned_volume() -> None:
    """The check itself: the two ways the nodes service failed or could fail."""
    image = Dockerfile("FROM python:3.11-slim\nWORKDIR /app\n"
                       "RUN mkdir -p /data && useradd app\nUSER app\n")
    compose = {"services": {"nodes": {
        "build": {"context": "..", "dockerfile": "docker/Dockerfile"},
        "command": ["hetsched-node", "sim-cluster"]}}}
    assert state_problems(compose, image) == [
        "nodes writes --state-dir=var/hetsched-node: a relative path, in the image's /app"]
    compose["services"]["nodes"].update(command=["hetsched-node", "sim-cluster",
                                                 "--state-dir", "/data/nodes"],
                                        volumes=["state:/data"])
    compose["volumes"] = {"state": None}
    assert state_problems(compose, image) == [
        "nodes writes --state-dir=/data/nodes: the Dockerfile must create /data and chown "
        "it to app (a fresh named volume takes its owner)"]
