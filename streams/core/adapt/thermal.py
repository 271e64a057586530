"""Thermal and power headroom: which GPUs are too hot (or throttled) for new work.

Why before throttling and not after: a GPU at its throttle temperature slows
every task on it; placing more work there makes it hotter. A node takes no
new work while any of its GPUs is within ``margin_c`` of the model's throttle
temperature or reports a thermal/power clock slowdown, and takes work again
only once all are ``2 * margin_c`` below it (hysteresis, so it does not flap).
"""

from __future__ import annotations

from collections.abc import Iterable

SLOWDOWN_REASONS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                              "hw_power_brake_slowdown", "sw_power_cap"})


def is_hot(temperature_c: float, reasons: Iterable[str], throttle_c: float,
           margin_c: float) -> bool:
    """The GPU is throttled or within ``margin_c`` of throttling."""
    return bool(SLOWDOWN_REASONS.intersection(reasons)) or temperature_c >= throttle_c - margin_c


def is_cool(temperature_c: float, reasons: Iterable[str], throttle_c: float,
            margin_c: float) -> bool:
    """Cool enough to take work again (below the hysteresis band)."""
    return not SLOWDOWN_REASONS.intersection(reasons) and (
        temperature_c < throttle_c - 2 * margin_c)
