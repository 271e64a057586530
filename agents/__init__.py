"""The node side: telemetry agent, threshold triggers and task executor."""
