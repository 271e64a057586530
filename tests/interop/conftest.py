"""The interop suite runs on the operator journeys' default cluster (a worker and
simulated nodes started as the docs say), and reads docs/api.md's blocks as the
docs test does: both live in tests/journeys."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "journeys"))

from live_cluster import _clean_default_topics_after, cluster, operator  # noqa: F401
