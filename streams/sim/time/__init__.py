"""Time mode of ``hetsched simulate``: the cell on a virtual clock (issue 7).

``jobs`` (the job model and the generic CSV), ``loaders`` (openb times, the
genai LoRA trace), ``mixed`` (the seeded mixed-workload generator and its
cluster), ``engine`` (the event loop), ``metrics`` and ``report``.
"""
