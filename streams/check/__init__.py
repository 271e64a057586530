"""Invariant checking of a scheduler run from its log alone (``hetsched check``)."""
