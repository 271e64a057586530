"""Pure decision core: cluster state and decisions, free of I/O and wall-clock time."""
