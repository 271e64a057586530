"""hetsched's integration API: event models, envelope, topic catalog, codec.

This package imports nothing else of the project's; every other side (the
scheduler in ``streams`` and the node side in ``agents``) depends on it.
"""
