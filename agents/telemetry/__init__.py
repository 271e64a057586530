"""GPU telemetry sources: NVML through pynvml, and simulated trace-replayed GPUs."""
