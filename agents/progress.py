"""Task progress: the count a task reports of its own work, turned into a rate.

How fast a task runs on a GPU model is what the scheduler learns to place by
(issue 35), and only the task knows its unit of work (training steps, samples,
tokens). So the executor hands every process task a file, named by
``HETSCHED_PROGRESS_FILE``, and the task appends a line with its cumulative count
whenever it likes (docs/node.md, "Progress"). A simulated task counts its
simulated work instead. The executor samples the count with its other usage
figures and puts the count and the rate at which it last changed in the
task's next ``TaskUsage`` (version 2).

Reading is defensive: the file belongs to the task, so a line that is not a
count is skipped (and logged once per task), a file that shrank is read again
from its start, and no read takes more than :data:`MAX_READ_BYTES`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PROGRESS_ENV = "HETSCHED_PROGRESS_FILE"
"""The environment variable naming a task's progress file."""

MAX_READ_BYTES = 64 * 1024
"""At most this much of the file is read per sample: a task printing its log into
the file must not make every sample read megabytes (the rest is read next time)."""

MAX_LINE_BYTES = 256
"""A count line is a number and perhaps a unit word; a longer unfinished line is
not one, and is dropped rather than kept growing."""


@dataclass(frozen=True, slots=True)
class ProgressReading:
    """A task's cumulative work count, and when it was seen (the backend's clock in
    the task's seconds: wall seconds for a process, simulated ones for a simulated
    task)."""

    units: float
    at_s: float


def parse_count(line: bytes) -> float | None:
    """The count a progress line states, or None when it states none.

    A line is a non-negative finite decimal, optionally followed by whitespace and
    a unit word (``1200`` or ``1200 samples``); blank lines state nothing."""
    words = line.split()
    if not words:
        return None
    try:
        value = float(words[0])
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value


class ProgressFile:
    """Reads what a task appended to its progress file since the last read."""

    def __init__(self, path: Path, task_id: str, *, from_end: bool = False) -> None:
        """``from_end``: skip what the file holds already (a restarted task's earlier
        runs), so the first rate of this run is measured between two of its own
        counts, not from the last count before the restart."""
        self.path = path
        self.task_id = task_id
        self._offset = 0
        self._partial = b""
        if from_end:
            self._offset = _after_last_line(path)
        self.last: float | None = None
        """The last count the file stated (None: none yet)."""
        self.bad_lines = 0
        """Lines that stated no count (each skipped; the first is logged)."""

    def read(self) -> float | None:
        """Read the appended lines; return the last count stated so far."""
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, 2)
                if size < self._offset:  # the task truncated or replaced its file
                    self._offset, self._partial = 0, b""
                f.seek(self._offset)
                chunk = f.read(MAX_READ_BYTES)
        except OSError:  # not created yet, or removed by the task: nothing new
            return self.last
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE_BYTES:
            self._skip(self._partial[:MAX_LINE_BYTES])
            self._partial = b""
        for line in lines:
            if not line.strip():
                continue
            value = parse_count(line)
            if value is None:
                self._skip(line)
            else:
                self.last = value
        return self.last

    def _skip(self, line: bytes) -> None:
        self.bad_lines += 1
        if self.bad_lines == 1:
            log.warning(
                "progress file line is not a count (a number, then optionally a unit "
                "word): %r; skipped, and later bad lines of this task silently",
                line[:80], extra={"task_id": self.task_id},
            )


def _after_last_line(path: Path) -> int:
    """The offset just after the file's last newline: a line the task is still
    writing is read whole later, not from its middle (``..12`` then ``34`` must not
    read as a count of 34)."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            start = max(0, size - MAX_READ_BYTES)
            f.seek(start)
            tail = f.read()
    except OSError:
        return 0
    newline = tail.rfind(b"\n")
    return start + newline + 1 if newline >= 0 else start


class ProgressWindow:
    """A task's progress readings between two usage reports.

    The rate is measured between the times the count was first seen at two
    values, so a task that writes its count once a minute, sampled every second,
    gets its true rate rather than one diluted by the samples in between. A count
    that goes back (the task restarted from an earlier checkpoint) starts the
    measurement again."""

    def __init__(self) -> None:
        self._last: ProgressReading | None = None
        self._rate: float | None = None
        self._news = False

    def add(self, reading: ProgressReading) -> None:
        last = self._last
        if last is not None and reading.units == last.units:
            return  # no change: the count was first seen at last.at_s
        if last is not None and reading.units < last.units:
            self._rate = None
        elif last is not None and reading.at_s > last.at_s:
            self._rate = (reading.units - last.units) / (reading.at_s - last.at_s)
        self._last = reading
        self._news = True

    def report(self) -> tuple[float, float | None] | None:
        """(count, rate per second) when the count changed since the last report,
        else None; the next window goes on from here."""
        if not self._news or self._last is None:
            return None
        self._news = False
        return self._last.units, self._rate
