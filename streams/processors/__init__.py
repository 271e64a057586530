"""Thin Faust agents: decode -> core.step() -> encode."""
