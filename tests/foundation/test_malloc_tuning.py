"""Large temporaries come from the heap once the thresholds are fixed (schemas/malloc_tuning.py).

Read through glibc's own accounting (``mallinfo2``: bytes in mmapped blocks) in a fresh
interpreter, with a 4 MiB block allocated and held: without the tuning glibc maps it
(its threshold starts at 128 KiB), with it the block comes from the heap; and every
command of the CLI runs with it.
"""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, sys
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
if sys.argv[1] == "tuned":
    from schemas.malloc_tuning import keep_large_blocks_in_heap
    assert keep_large_blocks_in_heap()
before = libc.mallinfo2().hblkhd
block = libc.malloc(4 << 20)
print(libc.mallinfo2().hblkhd - before)
"""

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or not hasattr(ctypes.CDLL(None), "mallinfo2"),
    reason="mallopt and mallinfo2 are glibc's (2.33+); elsewhere the tuning is a no-op")


def _mapped_bytes(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True)
    return int(out.stdout)


@glibc
def test_a_4_mib_block_is_mapped_by_default_and_comes_from_the_heap_once_tuned() -> None:
    assert _mapped_bytes("default") >= 4 << 20
    assert _mapped_bytes("tuned") == 0


@glibc
def test_every_command_runs_with_the_thresholds_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    from schemas import command_line, malloc_tuning

    calls: list[str] = []
    monkeypatch.setattr(malloc_tuning, "keep_large_blocks_in_heap", lambda: calls.append("x"))
    parser = command_line.build_parser("prog", "d", {})
    sub = parser._subparsers._group_actions[0]  # type: ignore[union-attr]
    cmd = sub.add_parser("noop")
    cmd.set_defaults(_run=lambda args: 0)
    assert command_line.run_command(parser, ["noop"]) == 0
    assert calls == ["x"]
