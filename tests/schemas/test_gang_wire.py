"""Gangs on the wire (issue 30): v2 submissions carry a shape, v1 stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from schemas.events import TaskSubmitted, TaskSubmittedV2
from streams.adapter import task_request
from streams.commands.submit import validate

SPEC = {"task_id": "pretrain", "tenant": "vision",
        "resources": {"gpu_count": 16, "nodes": 2, "gpus_per_node": 8},
        "executor": {"kind": "process", "argv": ["sleep", "1"]}}


def test_a_shaped_spec_is_sent_as_version_2_and_reaches_the_core_with_its_shape():
    (payload,), errors = validate(Path("f.yaml"), [SPEC])
    assert errors == []
    assert type(payload) is TaskSubmittedV2 and payload.EVENT_VERSION == 2
    req = task_request(payload)
    assert (req.num_gpu, req.nodes, req.gpus_per_node, req.mixed_models) == (16, 2, 8, False)


def test_a_plain_spec_stays_version_1():
    plain = {**SPEC, "resources": {"gpu_count": 16}}
    (payload,), _ = validate(Path("f.yaml"), [plain])
    assert type(payload) is TaskSubmitted
    assert task_request(payload).nodes == 0  # a gang of the fewest nodes, if it is one


@pytest.mark.parametrize("resources, field", [
    ({"gpu_count": 16, "nodes": 3}, "nodes 3"),
    ({"gpu_count": 16, "gpus_per_node": 6}, "gpus_per_node 6"),
    ({"gpu_count": 16, "nodes": 2, "gpus_per_node": 4}, "nodes 2 x gpus_per_node 4"),
    ({"gpu_count": 1, "gpu_share_milli": 500, "nodes": 1}, "whole GPUs"),
])
def test_a_shape_that_does_not_add_up_is_refused_naming_the_numbers(resources, field):
    with pytest.raises(ValidationError) as err:
        TaskSubmittedV2.model_validate({**SPEC, "resources": resources})
    assert field in str(err.value)
    _, errors = validate(Path("f.yaml"), [{**SPEC, "resources": resources}])
    assert len(errors) == 1 and "field resources" in errors[0]
