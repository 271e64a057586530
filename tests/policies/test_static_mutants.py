"""The static baseline's request transform (streams/policies/static.py): whole GPUs only.

``./dev mutate`` found no unit test of ``static_request``: a share below one GPU
becomes one whole GPU; whole-GPU, multi-GPU and CPU-only requests are unchanged.
"""

from __future__ import annotations

from streams.core.request import TaskRequest
from streams.policies.static import static_request


def test_a_fractional_share_becomes_one_whole_gpu_and_nothing_else_changes():
    req = TaskRequest("infer", 2000, 512, 1, 300, ("T4",), "n1")
    assert static_request(req) == TaskRequest("infer", 2000, 512, 1, 1000, ("T4",), "n1")


def test_whole_gpu_and_cpu_only_requests_are_kept_as_they_are():
    for req in (TaskRequest("train", 8000, 1024, 2, 1000),
                TaskRequest("one", 1000, 64, 1, 1000),
                TaskRequest("cpu", 4000, 256)):
        assert static_request(req) == req
