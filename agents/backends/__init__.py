"""Executor backends: how a placed task actually runs (a process, or a simulation)."""
