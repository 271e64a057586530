"""Adapting while tasks run: the pure policies behind probing, resizing, migration, failures.

One module per concern (``window``, ``membership``, ``elastic``, ``migration``,
``probe``, ``thermal``, ``energy``, ``reconcile``), each a set of pure
functions over small records; ``engine`` is the only module that touches a
``Cell`` and turns their verdicts into outcomes. Everything here is driven by
event time (``occurred_at`` of the input, ticks for periodic checks), iterates
in deterministic order and draws no randomness, so audit replay reproduces it.
"""
