"""The demo's live terminal view (rich): GPU use per model, queue, decisions, rates."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table

from streams.dashboard.short_id import WIDTH, short_id
from streams.demo.tracker import Tracker


def render(tracker: Tracker, title: str, progress: float) -> Group:
    """One frame of the view; ``progress`` is the replay's share done (0..1)."""
    models = Table(title="GPU allocation per model", expand=True)
    for col in ("model", "nodes", "GPUs", "allocated", "utilised"):
        models.add_column(col)
    models.add_column("", ratio=2)
    util = tracker.utilisation_by_model()
    for model, (nodes, gpus, share) in tracker.by_model().items():
        models.add_row(model, str(nodes), str(gpus), f"{share:.0%}",
                       f"{util.get(model, 0.0):.0%}", ProgressBar(total=1.0, completed=share))
    stats = Table.grid(padding=(0, 2))
    stats.add_row(
        f"[b]allocation[/b] {tracker.allocation():.0%}",
        f"[b]utilisation[/b] {tracker.utilisation():.0%} "
        f"(reported {tracker.reported_utilisation():.0%})",
        f"[b]fragmentation[/b] {tracker.fragmentation():.0%}",
        f"[b]queue[/b] {len(tracker.queue)}",
        f"[b]running[/b] {tracker.running}")
    stats.add_row(
        f"submitted {len(tracker.submitted_at)} ({tracker.rate('submitted'):.1f}/s)",
        f"decisions {sum(tracker.decisions.values())} ({tracker.rate('decisions'):.1f}/s)",
        f"finished {len(tracker.finished_at)} ({tracker.rate('finished'):.1f}/s)",
        "by type " + ", ".join(f"{k.removeprefix('Task')} {v}"
                               for k, v in sorted(tracker.decisions.items())), "")
    feed = Table(title="recent decisions", expand=True)
    feed.add_column("decision", overflow="ellipsis", no_wrap=True)
    # Ids of one run share a long prefix: cut in the middle (short_id), never by rich at
    # the end, which left every row reading the same run prefix.
    feed.add_column("task", no_wrap=True, min_width=WIDTH)
    for col in ("where", "reason"):
        feed.add_column(col, overflow="ellipsis", no_wrap=True)
    for r in list(tracker.recent)[:10]:
        color = "green" if r.kind == "TaskPlaced" else "yellow"
        feed.add_row(f"[{color}]{r.kind.removeprefix('Task')}[/]", short_id(r.task), r.where,
                     r.reason)
    bar = ProgressBar(total=1.0, completed=progress)
    return Group(Panel(stats, title=title), bar, models, feed)


def line(tracker: Tracker) -> str:
    """A one-line status for non-terminal output (logs, CI)."""
    return (f"alloc {tracker.allocation():.0%} util {tracker.utilisation():.0%} queue "
            f"{len(tracker.queue)} running {tracker.running} submitted "
            f"{len(tracker.submitted_at)} placed {len(tracker.placed_at)} finished "
            f"{len(tracker.finished_at)} decisions "
            f"{dict(sorted(tracker.decisions.items()))}")


def save_snapshot(view: Group, path: Path, title: str) -> None:
    """Write ``view`` as an SVG picture (for reports and the README's screenshot)."""
    import io

    from rich.console import Console

    recorder = Console(record=True, width=120, file=io.StringIO(), force_terminal=True)
    recorder.print(view)
    path.parent.mkdir(parents=True, exist_ok=True)
    recorder.save_svg(str(path), title=title)
