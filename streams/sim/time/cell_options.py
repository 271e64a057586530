"""The command-line options that only the cell can run (one list for every check).

Why one list: the whole-GPU baselines, Gavel's round-based policies and the speed
columns of issue 35 each refuse these options, and three copies of the list had to
be kept in step by hand. A leaf module (it imports nothing of the simulator) so
``baselines``, ``gavel`` and ``cli`` can all import it without a circle.

The adaptation and fault layer (issue 8: ``--adapt``, ``--fail-fraction``,
``--gpu-fail-fraction``, ``--throttle``) drives the cell's runs; ``--model-speed``
scales the cell's run times by catalog figures.
"""

from __future__ import annotations

from typing import Any

LAYER_OPTIONS: tuple[tuple[str, str], ...] = (
    ("--adapt", "adapt"),
    ("--fail-fraction", "fail_fraction"),
    ("--gpu-fail-fraction", "gpu_fail_fraction"),
    ("--throttle", "throttle"),
)
"""The adaptation and fault layer's options: (flag, ``argparse`` attribute)."""

MODEL_SPEED_OPTION = ("--model-speed", "model_speed")


def cell_only_flags(args: Any, with_model_speed: bool = True) -> list[str]:
    """The cell-only options set in ``args``, as flags in a fixed order (the layer's,
    then ``--model-speed`` when ``with_model_speed``); an option ``args`` lacks or
    leaves falsy is not set."""
    options = LAYER_OPTIONS + ((MODEL_SPEED_OPTION,) if with_model_speed else ())
    return [flag for flag, attr in options if getattr(args, attr, None)]
