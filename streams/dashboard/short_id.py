"""Task ids shortened in the middle, so rows that share a run prefix stay apart.

Task ids of one run share a long prefix (the demo's are ``<run id>-openb-pod-0412``):
cut at the end, every row read ``6960c703…`` and no two could be told apart. The
distinctive part is the tail, so the cut is in the middle: the first
:data:`HEAD` characters (enough to recognise the run), an ellipsis, and as much of
the tail as fits. The dashboard's ``app.js`` (``shortId``) applies the same rule,
with the whole id on hover.
"""

from __future__ import annotations

HEAD = 6
"""Characters kept from the start of a shortened id."""
WIDTH = 22
"""Longest id shown whole; longer ones are cut to exactly this many characters."""
ELLIPSIS = "…"


def short_id(task_id: str, width: int = WIDTH) -> str:
    """``task_id`` whole if it has at most ``width`` characters, else its first
    :data:`HEAD` characters, an ellipsis and its last ``width - HEAD - 1``."""
    if width < HEAD + 2:
        raise ValueError(f"width must be at least {HEAD + 2} (the head, an ellipsis and one "
                         f"character of the tail), got {width}")
    if len(task_id) <= width:
        return task_id
    return task_id[:HEAD] + ELLIPSIS + task_id[len(task_id) - (width - HEAD - 1):]
