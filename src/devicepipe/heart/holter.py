"""A Holter summary from labelled beats: ectopy burden, its patterns, pauses, heart-rate extremes and
atrial fibrillation, as a cardiologist reads one.

From each beat's time and AAMI class (:func:`devicepipe.ecg.ecg_classes`):

- **burden** per class: count, percent of all beats, per hour of recording;
- **couplets** (exactly two ventricular beats in a row) and **runs** (three or more; each with
  its rate from the intervals inside it, the longest and the fastest named);
- **bigeminy** and **trigeminy** episodes: three or more ventricular beats in a row each
  separated from the next by exactly one (two) other beats, from the first ventricular beat to
  the last;
- **pauses**: intervals over :data:`PAUSE_S` (2 s) between two beats (a detection too small to be
  a QRS, noise in a pause, does not end it);
- **heart rate**: the lowest and highest one-minute median rate with the minute it falls in,
  and the mean rate (beats per minute of the intervals);
- **atrial fibrillation** (suspected): stretches of irregularly irregular rhythm
  (``BeatClasses.irregular``) lasting :data:`AF_MIN_S` or more, and their share of the recording.

Each beat also gets its rhythm in WFDB's words (``(N``, ``(AFIB``, ``(B``, ``(T``, ``(VT``), for
the rhythm annotations written beside the beats. Host arrays throughout: a day's beats are
about 100,000 numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import positive
from devicepipe.heart.rate import minute_rates
from devicepipe.signal.runs import true_runs

__all__ = ["AF_MIN_S", "PAUSE_S", "Event", "Holter", "holter_summary"]

#: An RR interval longer than this is a pause, s.
PAUSE_S = 2.0
#: The shortest stretch of irregularly irregular rhythm counted as atrial fibrillation, s: CPSC
#: 2021 annotates paroxysms of 10 s (patient 92). (The clinical diagnosis of AF asks for 30 s on
#: one strip: each episode's length is listed.)
AF_MIN_S = 5.0
#: Events of each kind listed in full (all are counted).
LISTED = 100
#: The classes, in AAMI EC57's order.
CLASSES = ("N", "S", "V", "F", "Q")


@dataclass(frozen=True)
class Event:
    """One event: its kind, first and last beat (indices into the beats), their times (s), the
    beats in it, and a rate (bpm: a run's, from its intervals) or a length (s: a pause's)."""

    kind: str
    first_beat: int
    last_beat: int
    start_s: float
    end_s: float
    beats: int
    rate_bpm: float | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class Holter:
    """A Holter summary (see the module). ``events`` holds every event, in time order;
    ``rhythms`` each beat's rhythm label, shape ``(n,)``."""

    duration_s: float
    beats: int
    counts: dict[str, int]
    burden_pct: dict[str, float]
    per_hour: dict[str, float]
    events: list[Event]
    min_hr_bpm: float | None
    min_hr_at_s: float | None
    max_hr_bpm: float | None
    max_hr_at_s: float | None
    mean_hr_bpm: float | None
    af_share: float
    rhythms: np.ndarray = field(repr=False)

    def of(self, kind: str) -> list[Event]:
        """The events of one kind."""
        return [e for e in self.events if e.kind == kind]

    @property
    def af_kind(self) -> str:
        """The recording's kind as CPSC 2021 scores it: ``"no AF"``, ``"persistent AF"`` (one
        episode from the first beat to the last) or ``"paroxysmal AF"`` (any other episodes)."""
        episodes = self.of("afib")
        if not episodes:
            return "no AF"
        whole = len(episodes) == 1 and episodes[0].first_beat == 0 and episodes[0].last_beat == self.beats - 1
        return "persistent AF" if whole else "paroxysmal AF"

    def to_dict(self) -> dict[str, Any]:
        """``summary.json``'s ``holter``: the counts, and up to :data:`LISTED` events of each kind."""
        kinds = ("couplet", "run", "bigeminy", "trigeminy", "pause", "afib")
        runs, pauses = self.of("run"), self.of("pause")
        return {
            "duration_s": self.duration_s,
            "beats": self.beats,
            "counts": self.counts,
            "burden_pct": self.burden_pct,
            "per_hour": self.per_hour,
            "events": {kind: len(self.of(kind)) for kind in kinds},
            "longest_run_beats": max((e.beats for e in runs), default=None),
            "fastest_run_bpm": max((e.rate_bpm or 0.0 for e in runs), default=None),
            "longest_pause_s": max((e.seconds or 0.0 for e in pauses), default=None),
            "min_hr_bpm": self.min_hr_bpm,
            "min_hr_at_s": self.min_hr_at_s,
            "max_hr_bpm": self.max_hr_bpm,
            "max_hr_at_s": self.max_hr_at_s,
            "mean_hr_bpm": self.mean_hr_bpm,
            "af_share": self.af_share,
            "af_kind": self.af_kind,
            "listed": {kind: [asdict(e) for e in self.of(kind)[:LISTED]] for kind in kinds},
        }


def _stretches(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(first, last)`` index of each run of True in ``mask``."""
    return [(a, b - 1) for a, b in true_runs(mask)]


def _event(kind: str, a: int, b: int, t: np.ndarray, **more: Any) -> Event:
    return Event(kind, a, b, float(t[a]), float(t[b]), b - a + 1, **more)


def _ventricular_patterns(v: np.ndarray, t: np.ndarray) -> list[Event]:
    """Couplets, runs, bigeminy and trigeminy of the ventricular beats ``v`` (bool, ``(n,)``)."""
    events = []
    for a, b in _stretches(v):
        if b == a + 1:
            events.append(_event("couplet", a, b, t))
        elif b >= a + 2:
            rate = 60.0 * (b - a) / (t[b] - t[a])
            events.append(_event("run", a, b, t, rate_bpm=float(rate)))
    before, after = np.concatenate([[False], v[:-1]]), np.concatenate([v[1:], [False]])
    lone = np.flatnonzero(v & ~before & ~after)  # isolated ventricular beats
    for kind, gap in (("bigeminy", 2), ("trigeminy", 3)):
        steps = np.diff(lone) == gap
        for a, b in _stretches(steps):
            if b - a + 2 >= 3:  # three ventricular beats or more, each ``gap`` beats after the last
                events.append(_event(kind, int(lone[a]), int(lone[b + 1]), t))
    return events


def _pauses(t: np.ndarray, not_beats: np.ndarray | None, no_signal: np.ndarray | None = None) -> list[Event]:
    """The pauses between beats at times ``t`` (s, ``(n,)``) longer than :data:`PAUSE_S` (the
    detections of ``not_beats`` not ending one), but those across a stretch with no signal
    (``no_signal``: ``(k, 2)`` start and end, s), where no beat could be seen."""
    real = np.flatnonzero(~not_beats) if not_beats is not None else np.arange(t.size)
    rr = np.diff(t[real])
    long = np.flatnonzero(rr > PAUSE_S)
    if no_signal is not None and len(no_signal) and long.size:
        a, b = t[real[long]], t[real[long + 1]]
        blind = ((no_signal[None, :, 0] < b[:, None]) & (no_signal[None, :, 1] > a[:, None])).any(1)
        long = long[~blind]
    return [_event("pause", int(real[i]), int(real[i + 1]), t, seconds=float(rr[i])) for i in long]


def _check_beats(
    t: np.ndarray, labels: np.ndarray, irregular: np.ndarray, duration_s: float, not_beats: np.ndarray | None
) -> None:
    """A clear error unless the beats make a summary: times rising strictly, one label (an AAMI
    class) and one rhythm flag a beat, a finite, positive length (a summary of mismatched arrays,
    an unknown class or a length of 0 had been counted in silence)."""
    t = np.asarray(t)
    if t.ndim != 1 or (t.size > 1 and bool((np.diff(t) <= 0).any())):
        raise DevicepipeError("holter_summary(): t must be the beats' times in s, shape (n,), rising strictly.")
    shapes = {"labels": np.shape(labels), "irregular": np.shape(irregular)}
    if not_beats is not None:
        shapes["not_beats"] = np.shape(not_beats)
    wrong = {name: shape for name, shape in shapes.items() if shape != t.shape}
    if wrong:
        raise DevicepipeError(f"holter_summary(): every array needs one value a beat, shape {t.shape}; got {wrong}.")
    known = np.isin(np.asarray(labels), CLASSES)  # (five comparisons a beat: no sort of a month's labels)
    unknown = [] if known.all() else np.unique(np.asarray(labels)[~known]).astype(str).tolist()
    if unknown:
        raise DevicepipeError(f"holter_summary(): labels must be AAMI classes {list(CLASSES)}, got {unknown[:5]}.")
    positive(duration_s, "holter_summary()", "duration_s")


def holter_summary(
    t: np.ndarray,
    labels: np.ndarray,
    irregular: np.ndarray,
    duration_s: float,
    not_beats: np.ndarray | None = None,
    no_signal: np.ndarray | None = None,
) -> Holter:
    """The Holter summary of beats at times ``t`` (s, ``(n,)``, increasing) with AAMI classes
    ``labels`` and ``irregular`` (bool: in irregularly irregular rhythm), of a recording
    ``duration_s`` seconds long. ``not_beats`` (bool, ``(n,)``): detections too small to be a
    QRS, which do not end a pause (they are counted as Q). ``no_signal`` (``(k, 2)``, s): stretches
    where nothing was recorded (:func:`devicepipe.ecg.flat.flat_stretches`): no pause across them."""
    _check_beats(t, labels, irregular, duration_s, not_beats)
    n = int(t.size)
    hours = max(duration_s, 1e-9) / 3600.0
    counts = {c: int((labels == c).sum()) for c in CLASSES}
    burden = {c: 100.0 * k / n if n else 0.0 for c, k in counts.items()}
    per_hour = {c: k / hours for c, k in counts.items()}
    events = _ventricular_patterns(labels == "V", t) if n else []
    events += _pauses(t, not_beats, no_signal)
    af_time = 0.0
    for a, b in _stretches(irregular):
        if b > a and t[b] - t[a] >= AF_MIN_S:
            events.append(_event("afib", a, b, t))
            af_time += float(t[b] - t[a])
    events.sort(key=lambda e: (e.start_s, e.kind))
    rhythms = np.full(n, "(N", dtype="<U5")  # (as wide as "(AFIB"; an object array made a string a beat)
    for e in events:
        label = {"afib": "(AFIB", "bigeminy": "(B", "trigeminy": "(T", "run": "(VT"}.get(e.kind)
        if label:
            rhythms[e.first_beat : e.last_beat + 1] = label
    minutes = minute_rates(np.rint(t * 1000).astype(np.int64), 1000.0) if n > 1 else None
    slowest: tuple[float | None, float | None] = (None, None)  # a minute's median rate (bpm), its start (s)
    fastest = slowest
    if minutes is not None and minutes.minute.size > 0:
        lo, hi = int(np.argmin(minutes.median_bpm)), int(np.argmax(minutes.median_bpm))
        slowest = (float(minutes.median_bpm[lo]), float(60 * minutes.minute[lo]))
        fastest = (float(minutes.median_bpm[hi]), float(60 * minutes.minute[hi]))
    return Holter(
        duration_s=float(duration_s),
        beats=n,
        counts=counts,
        burden_pct=burden,
        per_hour=per_hour,
        events=events,
        min_hr_bpm=slowest[0],
        min_hr_at_s=slowest[1],
        max_hr_bpm=fastest[0],
        max_hr_at_s=fastest[1],
        mean_hr_bpm=float(60.0 * (n - 1) / (t[-1] - t[0])) if n > 1 and t[-1] > t[0] else None,
        af_share=af_time / duration_s if duration_s > 0 else 0.0,
        rhythms=rhythms,
    )
