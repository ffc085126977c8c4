"""The parts of a run's report page that several pages share: a section, a number as a page
shows it, embedded figures, and what an ECG run says of its heart: heart rate and HRV, the
beats by class and the Holter events."""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from markupsafe import Markup

from devicepipe.artifacts import caption, figures_shown
from devicepipe.artifacts.summaries import ABSENT, RunSummary, SpectralHRV
from devicepipe.ecg.validated import NOT_DIAGNOSTIC, VALIDATED, VALIDATED_ON
from devicepipe.heart.holter import PAUSE_S


@dataclass
class Section:
    title: str
    text: str = ""
    table: dict[str, Any] | None = None
    figures: list[dict[str, str]] = field(default_factory=list)
    html: Markup | None = None
    collapsed: bool = False  # the run's internals: closed until opened, at the end of the page


def sparkline(values: np.ndarray, typical: np.ndarray, width: int = 180, height: int = 46) -> Markup:
    """An inline SVG of ``values`` (red) over ``typical`` (grey), on one vertical scale."""
    both = np.concatenate([values, typical]).astype(np.float64)
    both = both[np.isfinite(both)]
    lo, hi = (float(both.min()), float(both.max())) if both.size else (0.0, 1.0)
    span = hi - lo or 1.0

    def points(v: np.ndarray) -> str:
        x = np.linspace(1, width - 1, v.size)
        y = height - 2 - (np.nan_to_num(v.astype(np.float64), nan=lo) - lo) / span * (height - 4)
        return " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(x, y, strict=True))

    return Markup(
        f'<svg class="beat" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'xmlns="http://www.w3.org/2000/svg" role="img">'
        f'<polyline fill="none" stroke="#b0b0b0" stroke-width="2" points="{points(typical)}"/>'
        f'<polyline fill="none" stroke="#c0392b" stroke-width="1.2" points="{points(values)}"/></svg>'
    )


def number(value: Any, digits: int = 4) -> str:
    if value is None or value is ABSENT or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):  # (never an exponent for a large value: 9,820, not 9.82e+03)
        return f"{value:,.{digits}g}" if abs(value) < min(1e4, 10**digits) else f"{value:,.0f}"
    return str(value)


def shown_figures(files: dict[str, Path], kind: str, section: str) -> list[dict[str, str]]:
    """The figures of ``files`` that a ``kind`` of run shows in the report section ``section``, as
    the artifact list declares them (:func:`devicepipe.artifacts.figures_shown`)."""
    return figure_list(files, figures_shown(kind, section))


def figure_list(files: dict[str, Path], names: Sequence[str]) -> list[dict[str, str]]:
    """Each of the figures ``names`` that the run wrote (in ``files``), embedded, with its caption."""
    out = []
    for name in names:
        path = files.get(name)
        if path is not None and Path(path).exists():
            data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
            out.append({"name": name, "caption": caption(name), "data": data})
    return out


#: The shortest recording (s) each HRV measure is shown for (Task Force of the ESC and NASPE,
#: Circulation 93(5), 1996: the 5-minute indices, SDANN and the SDNN index, are for long-term
#: recordings; the VLF band wants 5 minutes or more, LF 2, HF 1). ``summary.json`` holds them all.
HRV_MIN_S = {"sdann": 3600.0, "sdnn_index": 3600.0, "vlf": 300.0, "lf": 120.0, "hf": 60.0}


def _recording_s(summary: RunSummary) -> float:
    """The recording's length in seconds (0 where the summary does not say)."""
    fs, n = summary.sampling_rate_hz, summary.n_samples
    return float(n / fs) if fs and n else 0.0


def heart_rate_facts(summary: RunSummary) -> list[tuple[str, str]]:
    """The heart rate and the HRV measures that the recording's length supports (:data:`HRV_MIN_S`)."""
    h = summary.heart_rate
    if not h:
        return []
    long = _recording_s(summary)
    return [
        ("mean heart rate (bpm)", number(h.mean_hr_bpm, 3)),
        ("SDNN (ms)", number(h.sdnn_ms, 3)),
        ("RMSSD (ms)", number(h.rmssd_ms, 3)),
        ("pNN50 (%)", number(h.pnn50_pct, 3)),
        *([("SDANN, 5 min (ms)", number(h.sdann_ms, 3))] if long >= HRV_MIN_S["sdann"] else []),
        *([("SDNN index, 5 min (ms)", number(h.sdnn_index_ms, 3))] if long >= HRV_MIN_S["sdnn_index"] else []),
        ("NN intervals used / excluded", f"{h.n_intervals:,} / {_excluded(summary):,}"),
        *_spectral_facts(h.frequency, long),
    ]


def _excluded(summary: RunSummary) -> int:
    """The intervals HRV left out: by its cleaning, and where beats were classed, around every
    beat not classed N (the intervals between the beats found, less those used)."""
    h, found = summary.heart_rate, summary.counts.beats_found if summary.counts else None
    assert h is not None  # (the page shows HRV only where it was measured)
    if isinstance(found, int) and found > h.n_intervals:
        return found - 1 - h.n_intervals
    return h.n_implausible + h.n_ectopic


def _spectral_facts(f: SpectralHRV | None, long: float) -> list[tuple[str, str]]:
    """The HRV bands' powers a recording ``long`` seconds supports (:data:`HRV_MIN_S`), and LF/HF
    where both are."""
    if not f:
        return []
    bands = [(name, p) for name, p in (("VLF", f.vlf_ms2), ("LF", f.lf_ms2), ("HF", f.hf_ms2))
             if long >= HRV_MIN_S[name.lower()]]  # fmt: skip
    if not bands:
        return []
    facts = [(f"{' / '.join(n for n, _ in bands)} power (ms²)", " / ".join(number(p, 3) for _, p in bands))]
    return facts + ([("LF/HF", number(f.lf_hf, 3))] if long >= HRV_MIN_S["lf"] else [])


#: What each event kind is, as the Holter table says it.
_EVENT_WORDS = {
    "couplet": "couplets (two ventricular beats in a row)",
    "run": "runs (three or more ventricular beats)",
    "bigeminy": "bigeminy (every other beat ventricular)",
    "trigeminy": "trigeminy (every third beat ventricular)",
    "pause": "pauses (an interval over 2 s)",
    "afib": "irregularly irregular rhythm (suspected atrial fibrillation)",
}


def _af_words(h: Any) -> str:
    """The rhythm as the Holter summary reads it: no atrial fibrillation, its episodes, or all of it."""
    episodes = h.events.get("afib", 0)
    if not episodes:
        return "no atrial fibrillation"
    share = 100 * h.af_share
    if h.af_kind == "persistent AF":
        return "atrial fibrillation throughout (persistent)"
    kind = "paroxysmal atrial fibrillation" if h.af_kind == "paroxysmal AF" else "atrial fibrillation"  # (older runs)
    return f"{kind}: {episodes:,} episode{'s' if episodes != 1 else ''}, {share:.1f} % of the time"


def class_words(q_here: str) -> str:
    """The AAMI classes in words, as every page says them, with what Q holds where it is used
    (``q_here``)."""
    return (
        "Classes (ANSI/AAMI EC57): N normal and bundle-branch block, S supraventricular ectopic, V ventricular "
        f"ectopic, F fusion, Q unclassifiable ({q_here})."
    )


def clinical_facts(summary: RunSummary) -> list[tuple[str, str]]:
    """What a cardiologist reads first, for the page's first row: the ectopic beats with their
    burden, the rhythm, the events and the heart rate (none where the beats were not classed)."""
    h = summary.holter
    if not h:
        return []
    kinds = (("couplet", "couplets"), ("run", "runs"), ("bigeminy", "bigeminy"), ("pause", "pauses"))
    events = ", ".join(f"{number(h.events.get(k, 0))} {word}" for k, word in kinds)
    rate = f"{number(h.mean_hr_bpm, 3)} (lowest minute {number(h.min_hr_bpm, 3)}, highest {number(h.max_hr_bpm, 3)})"
    return [
        ("ventricular ectopic beats (V)", f"{number(h.counts['V'])} ({h.burden_pct['V']:.1f} %)"),
        ("supraventricular ectopic beats (S)", f"{number(h.counts['S'])} ({h.burden_pct['S']:.1f} %)"),
        ("rhythm", _af_words(h)),
        ("events", events),
        ("heart rate, every beat (bpm)", rate),
    ]


def _trust_section() -> Section:
    """How far the classes can be trusted: the figures measured on annotated recordings."""
    rows = [[v.what, v.records, number(v.reference), f"{v.se:.3f}", f"{v.second} {v.ppv:.3f}", v.note or "-"]
            for v in VALIDATED]  # fmt: skip
    text = (
        f"{NOT_DIAGNOSTIC} Measured on recordings annotated by cardiologists ({VALIDATED_ON}; matched within "
        "150 ms as ANSI/AAMI EC57 scores them): what share of the reference's beats of each kind were found "
        "(sensitivity) and what share of those called so were right (positive predictivity)."
    )
    header = ["what", "records", "reference beats", "sensitivity", "predictivity (or specificity)", "where it fails"]
    return Section("How far to trust these classes", text, {"header": header, "rows": rows})


def _clock(seconds: float | None) -> str:
    """``h:mm:ss`` from the recording's start."""
    if seconds is None:
        return "-"
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def holter_sections(summary: RunSummary, scored: bool, files: dict[str, Path], kind: str) -> list[Section]:
    """The Holter summary: beats per class, and the events (``scored``: the run also scored the
    beats, and the page says which to read first)."""
    h = summary.holter
    if not h:
        return []
    first = (
        "Read these first: each beat's class comes from its rhythm and its shape, whatever the share of "
        "ectopic beats. The anomaly score below is for beats unusual beyond their class. "
        if scored
        else ""
    )
    warned = "".join(f"Warning: {w}. " for w in h.warnings or [])
    q_here = "here: in poor signal, too small for a QRS, cut flat at the signal's limit, or paced"
    text = (
        f"{warned}{first}{class_words(q_here)} Each beat's class and why "
        "are in beats.parquet (class, reason) and the annotation file."
    )
    rows = [[name, number(h.counts[name]), f"{h.burden_pct[name]:.2f} %", f"{h.per_hour[name]:,.1f}"]
            for name in h.counts]  # fmt: skip
    sections = [Section("Beats by class", text, {"header": ["class", "beats", "share", "per hour"], "rows": rows})]
    sections.append(_trust_section())
    events = []
    for event, words in _EVENT_WORDS.items():
        listed = h.listed.get(event, [])
        when = ", ".join(_clock(e["start_s"]) for e in listed[:5]) + (" ..." if len(listed) > 5 else "")
        events.append([words, number(h.events.get(event, 0)), when or "-"])
    runs = (
        "No run of three or more ventricular beats"
        if h.longest_run_beats is None
        else f"Longest run: {number(h.longest_run_beats)} beats, fastest {number(h.fastest_run_bpm, 3)} bpm"
    )
    pause = (
        f"no pause over {PAUSE_S:g} s"
        if h.longest_pause_s is None
        else f"longest pause {number(h.longest_pause_s, 3)} s"
    )
    facts = (
        f"Heart rate: lowest one-minute median {number(h.min_hr_bpm, 3)} bpm at {_clock(h.min_hr_at_s)}, highest "
        f"{number(h.max_hr_bpm, 3)} bpm at {_clock(h.max_hr_at_s)}, mean {number(h.mean_hr_bpm, 3)} bpm. "
        f"{runs}; {pause}; irregularly irregular rhythm {100 * h.af_share:.1f} % of the recording. Times are from "
        "the recording's start (h:mm:ss)."
    )
    table = {"header": ["event", "count", "first at"], "rows": events}
    sections.append(Section("Events", facts, table, figures=shown_figures(files, kind, "events")))
    return sections
