"""Gavel's round-based scheduling policies, as baselines (issue 35, part 4).

``gavel-las`` (Gavel's ``max_min_fairness_perf``), ``gavel-fifo`` (``fifo_perf``)
and ``las`` (the heterogeneity-agnostic ``max_min_fairness``) on 360 s rounds,
with time-sharing by preemption at round boundaries: ``policies`` (the LP, by
SciPy's HiGHS, and FIFO), ``mechanism`` (priorities and each round's placement),
``simulator`` (the rounds), ``workload`` (reading the CSVs), ``metrics``.
Run: ``python -m streams.sim.time.rounds --jobs FILE --nodes FILE --policy P``.
In ``hetsched simulate --mode time --policies gavel-las,...`` beside the other
policies: ``streams.sim.time.gavel``.
"""
