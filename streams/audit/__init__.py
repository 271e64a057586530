"""Audit: export the event log, check its integrity, replay it, explain decisions.

The per-cell input log is the source of truth and the decisions topic is the
record of what the scheduler did with it. This package turns the two into a
portable file (:mod:`.logfile`), checks that file for gaps, duplicates and
reordering (:mod:`.integrity`), re-runs the service's own pure step over it
(:mod:`streams.replay`) and compares, and tells one task's story
(:mod:`.explain`). See docs/auditing.md.
"""
