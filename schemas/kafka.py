"""Where the Kafka cluster is: one place for every client of the project.

``KAFKA_BOOTSTRAP`` (comma-separated host:port list) points every process at an
existing cluster; without it the project's embedded broker on 127.0.0.1 is used,
on ``HETSCHED_KAFKA_PORT`` (default 9092).
"""

from __future__ import annotations

import os

DEFAULT_PORT = 9092


def bootstrap_servers() -> str:
    """Return the bootstrap server list clients should connect to."""
    explicit = os.environ.get("KAFKA_BOOTSTRAP", "").strip()
    if explicit:
        return explicit
    port = os.environ.get("HETSCHED_KAFKA_PORT", "").strip() or str(DEFAULT_PORT)
    return f"127.0.0.1:{port}"


def faust_broker_url(servers: str | None = None) -> str:
    """Faust wants ``kafka://host:port;host:port``."""
    hosts = (servers or bootstrap_servers()).split(",")
    return ";".join(f"kafka://{h.strip()}" for h in hosts if h.strip())
