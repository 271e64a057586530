"""The embedded broker's KRaft cluster id (docker/kafka/lib.sh ``new_cluster_id``).

An id starting with "-" made the storage tool read it as an option ("--cluster-id/-t:
expected one argument"), so about one broker start in 64 failed (two in one CI run).
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "docker" / "kafka" / "lib.sh"
SAMPLES = 300  # the old generator gave an id starting with "-" here with p = 0.99


def test_cluster_ids_are_16_bytes_and_never_look_like_an_option() -> None:
    script = f'source "{LIB}"; for _ in $(seq {SAMPLES}); do new_cluster_id; done'
    ids = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert len(ids) == SAMPLES
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == SAMPLES
