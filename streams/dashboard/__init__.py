"""The worker's web dashboard: plain HTML/JS/CSS (no build step) and its JSON feed.

Pages, registered on the worker's web server by :func:`register_dashboard`:

* ``/dashboard``: the page (``static/index.html``, ``app.js``, ``style.css``);
* ``/dashboard/data``: one JSON document the page polls every second: nodes
  with per-GPU allocated share, utilisation and temperature, queue with
  tenants, recent decisions with their reasons, and the allocation/queue
  history.

The feed of decisions, telemetry and tenants comes from a read-only,
read-committed consumer inside the worker (:mod:`streams.dashboard.feed`):
the dashboard watches the same topics every other client sees and never
touches the scheduler's tables or transactions.
"""

from __future__ import annotations

from streams.dashboard.pages import register_dashboard

__all__ = ["register_dashboard"]
