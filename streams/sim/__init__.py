"""Trace-driven simulators that run the pure core on a virtual clock, without Kafka."""
