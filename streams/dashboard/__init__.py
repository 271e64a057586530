"""The worker's web dashboard: plain HTML/JS/CSS (no build step) and its JSON feed.

Pages, registered on the worker's web server by :func:`register_dashboard`:

* ``/dashboard``: the page (``static/index.html``, ``app.js``, ``style.css``);
* ``/dashboard/data``: one JSON document the page polls every second: nodes
  with per-GPU allocated share, utilisation and temperature, queue with
  tenants, recent decisions with their reasons, and the allocation/queue
  history;
* ``/task/<id>``: one task's view (:mod:`streams.dashboard.task_view`): its
  timeline as ``hetsched explain`` tells it and, while it waits, the verdicts of
  its latest decision; the page opens it for any task clicked (``#task=<id>``).

The feed of decisions, telemetry, tenants and each recent task's records comes
from a read-only, read-committed consumer of the input log and the decisions
inside the worker (:mod:`streams.dashboard.feed`): the dashboard watches the same
topics every other client sees and never touches the scheduler's tables or
transactions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import faust

    from streams.processors.context import Context
    from streams.processors.scheduling import CellStore

__all__ = ["register_dashboard"]


def register_dashboard(app: faust.App, ctx: Context, store: CellStore) -> None:
    """:func:`streams.dashboard.pages.register_dashboard`, imported when called: the
    demo's live view imports :mod:`streams.dashboard.short_id` and must not load Faust
    (and the worker's pages) with it."""
    from streams.dashboard.pages import register_dashboard as register

    register(app, ctx, store)
