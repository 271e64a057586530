"""Python twins of the compiled core's pieces (hetsched_core), kept only as test oracles.

Nothing in production imports this package: each module here is the readable
statement of what a piece of the core computes, and the differential tests compare
the core with it bit for bit on randomized inputs (docs/core.md).
"""
