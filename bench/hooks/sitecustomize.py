"""Bench only: count a worker's Kafka requests by type (``bench/service.py --count-requests``).

Python imports ``sitecustomize`` at start-up from its path; ``bench/service.py``
puts this folder first on the worker's ``PYTHONPATH`` and names a folder in
``HETSCHED_BENCH_REQUESTS``. The worker then appends, every half second, one JSON
line with its request counts so far and its CPU seconds to
``<folder>/requests-<pid>.jsonl``. Without the variable this does nothing.
"""

from __future__ import annotations

import os

_FOLDER = os.environ.get("HETSCHED_BENCH_REQUESTS")

if _FOLDER:
    import collections
    import json
    import threading
    import time
    from typing import Any

    from aiokafka import conn

    _counts: collections.Counter[str] = collections.Counter()
    _send = conn.AIOKafkaConnection.send

    def _counting_send(self: Any, request: Any, expect_response: bool = True) -> Any:
        _counts[type(request).__name__] += 1
        return _send(self, request, expect_response)

    conn.AIOKafkaConnection.send = _counting_send  # type: ignore[method-assign]

    def _dump(folder: str) -> None:
        path = os.path.join(folder, f"requests-{os.getpid()}.jsonl")
        while True:
            time.sleep(0.5)
            row = {"t": time.time(), "cpu": time.process_time(), **_counts}
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")

    threading.Thread(target=_dump, args=(_FOLDER,), daemon=True,
                     name="bench-request-count").start()
