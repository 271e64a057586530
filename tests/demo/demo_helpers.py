"""Helpers of the demo tests: free ports, scraping, leftover processes."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int, path: str = "/metrics") -> dict[str, list[tuple[dict[str, str], float]]]:
    """Metric families at ``port`` parsed as Prometheus text: name -> samples."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
        text = r.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def processes_with_env(marker: str) -> list[int]:
    """Pids whose environment holds ``marker`` (e.g. ``HETSCHED_DEMO_RUN=abc``)."""
    found = []
    needle = marker.encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(proc.name))
    return found
