"""Threshold triggers: decide when a GPU's state is worth an event.

Agents must not stream every sample (ARCHITECTURE.md, event flow 1): the
scheduler's input log is the source of truth and replays decision by decision,
so each telemetry event has to mean "something the scheduler may act on
changed". This engine turns a stream of samples into those few events.

How it decides, per GPU:

* Every numeric metric is optionally smoothed (an EWMA with a time constant,
  so "utilisation stays above the high-water mark" is judged on a sustained
  level, not on one spiky sample) and then quantised into **bands** by
  ascending edges with Schmitt-trigger **hysteresis**: the value enters the
  band above an edge as soon as it reaches the edge, and falls back below that
  edge only once it is ``hysteresis`` under it. A value hovering at an edge
  therefore changes band once, not on every sample.
* Throttling (thermal, power) is a two-band metric: on or off.
* The engine keeps the last **reported** state of each GPU (its bands and
  throttle flags). An event is due whenever the current state differs from the
  reported one, but at most one per GPU every ``min_interval_s``: a change that
  reverts within the interval is never sent at all, and one that persists is
  sent when the interval allows, carrying what changed since the last report.
* **Errors skip the interval**: new XID errors or a rise in the uncorrected
  ECC count make an immediate event; a fatal XID, a fatal fault (GPU lost) or
  ``fault_tolerance`` non-fatal faults in a row fail the GPU (once).
* A node **heartbeat** every ``heartbeat_s`` proves liveness between events.

The engine is pure: the caller passes the time in, nothing here reads a clock
or does I/O, so the same curves always give the same events (the tests and
``bench/triggers.py`` rely on that).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import pairwise
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agents.telemetry.base import GpuFault, GpuReading, GpuSample

Direction = Literal["rising", "falling"]


class BandSpec(BaseModel):
    """Thresholds of one metric.

    ``edges`` ascending, in the metric's config unit; empty disables the metric.
    ``hysteresis`` is how far below an edge the value must fall to leave the
    band above it. ``smoothing_s`` is the EWMA time constant (0 = raw samples).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    edges: tuple[float, ...]
    hysteresis: float = Field(ge=0)
    smoothing_s: float = Field(default=0.0, ge=0)

    @field_validator("edges")
    @classmethod
    def _ascending(cls, edges: tuple[float, ...]) -> tuple[float, ...]:
        if any(b <= a for a, b in pairwise(edges)):
            raise ValueError("edges must be strictly ascending")
        return edges

    def band_of(self, value: float) -> int:
        """The band a value falls in without history: how many edges it has reached."""
        return sum(1 for edge in self.edges if value >= edge)

    def next_band(self, band: int, value: float) -> int:
        """Schmitt update: rise at an edge, fall only ``hysteresis`` below it."""
        raw = self.band_of(value)
        if raw >= band:
            return raw
        return min(band, self.band_of(value + self.hysteresis))


class TriggerConfig(BaseModel):
    """Every knob of the trigger engine, with the defaults a node starts from.

    Utilisation, memory and power are in percent (power of the GPU's enforced
    limit, so one config fits every GPU model); temperature in degrees Celsius.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu_util_pct: BandSpec = BandSpec(edges=(30.0, 80.0), hysteresis=10.0, smoothing_s=300.0)
    """Low/high water marks of the scheduler's scale-down/scale-up rules. The
    5-minute EWMA is what "stays above" means; GenAI serving curves spike from
    0 to 95 % minute to minute, and raw samples would report every spike."""
    mem_used_pct: BandSpec = BandSpec(edges=(50.0, 80.0, 95.0), hysteresis=5.0)
    """Memory is a hard limit (an OOM is immediate), so it is judged raw."""
    temperature_c: BandSpec = BandSpec(edges=(80.0, 87.0), hysteresis=3.0, smoothing_s=30.0)
    """80 C: thermal headroom is shrinking; 87 C: most data-centre GPUs start
    thermal slowdown soon after."""
    power_pct_of_limit: BandSpec = BandSpec(edges=(95.0,), hysteresis=10.0, smoothing_s=30.0)
    """Near the power cap: the energy policy's signal that this GPU has no headroom."""
    throttle: bool = True
    """Report changes of thermal / power throttling."""
    foreign_mem_step_mib: float = Field(default=256.0, gt=0)
    """Report a GPU when the memory held by processes of no task of this node
    (``GpuSample.foreign_mem_mib``) moved this far from what was last reported, so
    the scheduler stops booking memory a stranger took (a CUDA context alone is
    ~300-500 MiB, so smaller moves are noise). A rise is sent at once, not held
    for ``min_interval_s``; a fall waits for the interval like other changes."""
    min_interval_s: float = Field(default=30.0, ge=0)
    """At most one non-error event per GPU this often."""
    heartbeat_s: float = Field(default=30.0, gt=0)
    """Node heartbeat period; the scheduler suspects a node after a few missed."""
    fault_tolerance: int = Field(default=3, ge=1)
    """Non-fatal faults (timeouts) in a row before a GPU is declared failed."""
    fatal_xids: tuple[int, ...] = (48, 74, 79, 92, 95, 119, 120)
    """XIDs that take the GPU out of service: 48 double-bit ECC, 74 NVLink
    error, 79 fallen off the bus, 92 high single-bit ECC rate, 95 uncontained
    ECC error, 119/120 GSP firmware errors. Application XIDs (13, 31, 43...)
    are reported but do not fail the GPU."""

    @model_validator(mode="after")
    def _positive_heartbeat(self) -> TriggerConfig:
        if not math.isfinite(self.heartbeat_s):
            raise ValueError("heartbeat_s must be finite")
        return self


@dataclass(frozen=True, slots=True)
class _Metric:
    """A banded metric: how to read it from a sample and express it on the wire."""

    name: str
    """Wire name (``schemas.events.node.TelemetryMetric``)."""
    config_key: str
    read: Callable[[GpuSample], float | None]
    """Value in the config's unit."""
    to_wire: Callable[[GpuSample, float], float]
    """Convert a config-unit value (a threshold) to the wire unit."""


def _same(_: GpuSample, value: float) -> float:
    return value


def _power_w(sample: GpuSample, pct: float) -> float:
    return pct * (sample.power_limit_w or 0.0) / 100.0


METRICS: tuple[_Metric, ...] = (
    _Metric("gpu_util_pct", "gpu_util_pct", lambda s: s.util_pct, _same),
    _Metric("mem_used_pct", "mem_used_pct", lambda s: s.mem_used_pct, _same),
    _Metric("temperature_c", "temperature_c", lambda s: s.temperature_c, _same),
    _Metric("power_w", "power_pct_of_limit", lambda s: s.power_pct_of_limit, _power_w),
)
FLAGS: tuple[tuple[str, Callable[[GpuSample], bool]], ...] = (
    ("thermal", lambda s: s.thermal_throttled),
    ("power", lambda s: s.power_throttled),
)


@dataclass(frozen=True, slots=True)
class Crossing:
    """One threshold that fired: maps 1:1 onto ``schemas`` ``ThresholdCrossing``."""

    metric: str
    direction: Direction
    threshold: float
    """The edge crossed, in wire units: the edge when rising, edge - hysteresis when falling."""
    value: float
    """The (smoothed) value that crossed it, in wire units."""


class TriggerKind(StrEnum):
    """What the agent should publish."""

    SNAPSHOT = "snapshot"
    """First state of a GPU: ``GpuTelemetry`` with no crossings."""
    TELEMETRY = "telemetry"
    """``GpuTelemetry`` with the crossings (or errors) that made it due."""
    FAILED = "failed"
    """``GpuFailed``: the GPU is out of service."""
    HEARTBEAT = "heartbeat"
    """``NodeHeartbeat``."""


FailReason = Literal["xid", "ecc_uncorrectable", "fell_off_bus", "thermal", "unknown"]
_XID_REASONS: dict[int, FailReason] = {48: "ecc_uncorrectable", 79: "fell_off_bus"}


@dataclass(frozen=True, slots=True)
class GpuState:
    """A GPU as judged: the last sample with smoothed values in place of raw ones."""

    sample: GpuSample
    values: dict[str, float] = field(default_factory=dict)
    """Config-unit value per banded metric (smoothed where configured)."""

    @property
    def util_pct(self) -> float:
        return self.values.get("gpu_util_pct", self.sample.util_pct)

    @property
    def temperature_c(self) -> float | None:
        return self.values.get("temperature_c", self.sample.temperature_c)

    @property
    def power_w(self) -> float | None:
        pct = self.values.get("power_pct_of_limit")
        return self.sample.power_w if pct is None else _power_w(self.sample, pct)


@dataclass(frozen=True, slots=True)
class Trigger:
    """One event the agent should publish."""

    kind: TriggerKind
    at_s: float
    gpu_index: int | None = None
    state: GpuState | None = None
    crossings: tuple[Crossing, ...] = ()
    errors: tuple[str, ...] = ()
    """Why an immediate event was sent: ``xid:79``, ``ecc_dbe:+2``, a fault text."""
    fail_reason: FailReason | None = None
    xid: int | None = None


@dataclass(slots=True)
class _Track:
    """Per-GPU memory of the engine."""

    smoothed: dict[str, float] = field(default_factory=dict)
    bands: dict[str, int] = field(default_factory=dict)
    flags: dict[str, bool] = field(default_factory=dict)
    last_t: float | None = None
    reported_bands: dict[str, int] | None = None
    reported_flags: dict[str, bool] = field(default_factory=dict)
    last_event_s: float = -math.inf
    ecc_dbe: int | None = None
    faults_in_row: int = 0
    failed: bool = False
    state: GpuState | None = None
    reported_foreign: float = 0.0


@dataclass(slots=True)
class EngineStats:
    """Counts for benchmarks and logs."""

    samples: int = 0
    events: int = 0
    heartbeats: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class TriggerEngine:
    """Decides, sample by sample, which events a node's agent publishes.

    Call :meth:`observe` with every reading in time order; it returns the
    events due at that time (possibly none). Not thread-safe; one per node.
    """

    def __init__(self, config: TriggerConfig | None = None) -> None:
        self.config = config or TriggerConfig()
        self._tracks: dict[int, _Track] = {}
        self._last_heartbeat_s: float | None = None
        self.stats = EngineStats()

    # -- public -------------------------------------------------------------

    def observe(self, now_s: float, readings: Iterable[GpuReading]) -> list[Trigger]:
        """Feed one round of readings taken at ``now_s``; return the events due."""
        out: list[Trigger] = []
        for reading in readings:
            track = self._tracks.setdefault(reading.index, _Track())
            if track.failed:
                continue
            if isinstance(reading, GpuFault):
                trigger = self._on_fault(now_s, track, reading)
            else:
                track.faults_in_row = 0
                trigger = self._on_sample(now_s, track, reading)
            if trigger is not None:
                out.append(trigger)
        self._count(out)
        out.extend(self.tick(now_s))
        return out

    def tick(self, now_s: float) -> list[Trigger]:
        """Heartbeat due at ``now_s``? (``observe`` calls this; call it alone when idle.)"""
        beat = self._heartbeat(now_s)
        self._count(beat)
        return beat

    def _heartbeat(self, now_s: float) -> list[Trigger]:
        if self._last_heartbeat_s is None:
            self._last_heartbeat_s = now_s
            return []
        if now_s - self._last_heartbeat_s < self.config.heartbeat_s:
            return []
        self._last_heartbeat_s = now_s
        return [Trigger(TriggerKind.HEARTBEAT, now_s)]

    def state(self, gpu_index: int) -> GpuState | None:
        """The GPU's latest judged state (for heartbeats and debugging)."""
        track = self._tracks.get(gpu_index)
        return None if track is None else track.state

    def failed_gpus(self) -> list[int]:
        """Indices of GPUs this engine has declared failed, ascending."""
        return sorted(i for i, t in self._tracks.items() if t.failed)

    def resync(self) -> None:
        """Forget what was reported, so every GPU's next sample is a snapshot
        (after a reconnect the scheduler may have missed events)."""
        for track in self._tracks.values():
            track.reported_bands = None

    # -- internals ----------------------------------------------------------

    def _count(self, triggers: Sequence[Trigger]) -> None:
        for trig in triggers:
            if trig.kind is TriggerKind.HEARTBEAT:
                self.stats.heartbeats += 1
            else:
                self.stats.events += 1
            self.stats.by_kind[trig.kind.value] = self.stats.by_kind.get(trig.kind.value, 0) + 1

    def _on_fault(self, now_s: float, track: _Track, fault: GpuFault) -> Trigger | None:
        track.faults_in_row += 1
        if not fault.fatal and track.faults_in_row < self.config.fault_tolerance:
            return None
        track.failed = True
        reason: FailReason = "fell_off_bus" if fault.fatal else "unknown"
        return Trigger(
            TriggerKind.FAILED,
            now_s,
            fault.index,
            state=track.state,
            errors=(fault.reason,),
            fail_reason=reason,
        )

    def _smooth(self, now_s: float, track: _Track, sample: GpuSample) -> dict[str, float]:
        dt = None if track.last_t is None else max(0.0, now_s - track.last_t)
        for metric in METRICS:
            raw = metric.read(sample)
            if raw is None:
                continue
            spec: BandSpec = getattr(self.config, metric.config_key)
            prev = track.smoothed.get(metric.config_key)
            if prev is None or dt is None or spec.smoothing_s <= 0:
                value = raw
            else:
                alpha = 1.0 - math.exp(-dt / spec.smoothing_s)
                value = prev + alpha * (raw - prev)
            track.smoothed[metric.config_key] = value
        track.last_t = now_s
        return dict(track.smoothed)

    def _on_sample(self, now_s: float, track: _Track, sample: GpuSample) -> Trigger | None:
        self.stats.samples += 1
        values = self._smooth(now_s, track, sample)
        track.state = GpuState(sample, values)
        for metric in METRICS:
            spec: BandSpec = getattr(self.config, metric.config_key)
            value = values.get(metric.config_key)
            if value is None or not spec.edges:
                continue
            band = track.bands.get(metric.config_key)
            track.bands[metric.config_key] = (
                spec.band_of(value) if band is None else spec.next_band(band, value)
            )
        if self.config.throttle:
            for name, read in FLAGS:
                track.flags[name] = read(sample)

        fatal = self._fatal_xid(sample)
        if fatal is not None:
            track.failed = True
            reason = _XID_REASONS.get(fatal, "xid")
            return Trigger(
                TriggerKind.FAILED,
                now_s,
                sample.index,
                state=track.state,
                errors=(f"xid:{fatal}",),
                fail_reason=reason,
                xid=fatal,
            )
        errors = self._errors(track, sample)

        if track.reported_bands is None:
            return self._report(now_s, track, TriggerKind.SNAPSHOT, (), errors)
        crossings = self._crossings(track, sample)
        if errors:
            return self._report(now_s, track, TriggerKind.TELEMETRY, crossings, errors)
        foreign = sample.foreign_mem_mib
        step = self.config.foreign_mem_step_mib
        moved = foreign is not None and abs(foreign - track.reported_foreign) >= step
        if foreign is not None and foreign - track.reported_foreign >= step:
            # A stranger took memory: until the scheduler hears it may book that memory
            # (an OOM for whoever lands there), so this skips the interval like an error;
            # each report needs another ``step`` of growth, which bounds the rate.
            return self._report(now_s, track, TriggerKind.TELEMETRY, crossings, ())
        if (crossings or moved) and now_s - track.last_event_s >= self.config.min_interval_s:
            return self._report(now_s, track, TriggerKind.TELEMETRY, crossings, ())
        return None

    def _fatal_xid(self, sample: GpuSample) -> int | None:
        for xid in sample.xids:
            if xid in self.config.fatal_xids:
                return xid
        return None

    def _errors(self, track: _Track, sample: GpuSample) -> tuple[str, ...]:
        errors = [f"xid:{x}" for x in sample.xids]
        dbe = sample.ecc_dbe_total
        if dbe is not None:
            if track.ecc_dbe is not None and dbe > track.ecc_dbe:
                errors.append(f"ecc_dbe:+{dbe - track.ecc_dbe}")
            track.ecc_dbe = dbe
        return tuple(errors)

    def _crossings(self, track: _Track, sample: GpuSample) -> tuple[Crossing, ...]:
        """Differences between the current and the last reported state."""
        assert track.reported_bands is not None
        out: list[Crossing] = []
        for metric in METRICS:
            spec: BandSpec = getattr(self.config, metric.config_key)
            now_band = track.bands.get(metric.config_key)
            then_band = track.reported_bands.get(metric.config_key)
            if now_band is None or then_band is None or now_band == then_band:
                continue
            value = metric.to_wire(sample, track.smoothed[metric.config_key])
            if now_band > then_band:
                edge = spec.edges[now_band - 1]
                out.append(Crossing(metric.name, "rising", metric.to_wire(sample, edge), value))
            else:
                edge = spec.edges[now_band] - spec.hysteresis
                out.append(Crossing(metric.name, "falling", metric.to_wire(sample, edge), value))
        for name, _ in FLAGS:
            now_on = track.flags.get(name, False)
            if now_on != track.reported_flags.get(name, False):
                out.append(
                    Crossing(
                        "throttle",
                        "rising" if now_on else "falling",
                        1.0,
                        1.0 if now_on else 0.0,
                    )
                )
        return tuple(out)

    def _report(
        self,
        now_s: float,
        track: _Track,
        kind: TriggerKind,
        crossings: tuple[Crossing, ...],
        errors: tuple[str, ...],
    ) -> Trigger:
        track.reported_bands = dict(track.bands)
        track.reported_flags = dict(track.flags)
        track.last_event_s = now_s
        assert track.state is not None
        track.reported_foreign = track.state.sample.foreign_mem_mib or 0.0
        return Trigger(
            kind,
            now_s,
            track.state.sample.index,
            state=track.state,
            crossings=crossings,
            errors=errors,
        )
