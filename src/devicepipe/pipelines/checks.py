"""What the beats say about a run: the heart rate, warnings about the settings, accuracy and
flags against a reference."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.spill import Stored
from devicepipe.ecg import (
    AAMI_CLASSES,
    EDGE_S,
    MATCH_TOLERANCE_S,
    BeatScore,
    aami_class,
    evaluate_beats,
    label_beats,
)
from devicepipe.io import (
    Recording,
    ReferenceBeats,
)
from devicepipe.pipelines import context
from devicepipe.signal.blocks import median_of_parts

PLAUSIBLE_BPM = (20.0, 300.0)
#: The lowest rate at which the detector found every beat of a simulated ECG (resampled from
#: 1000 Hz: F1 1.0 at 30 Hz, 0.93 at 25 and 0.79 at 20, beats missed and invented;
#: ``tests/unit/test_ecg.py``); under it a run warns.
MIN_ECG_HZ = 30.0


def median_heart_rate(peaks: np.ndarray | Stored, sampling_rate: float) -> float | None:
    """60 / the median RR interval, in beats per minute; None with fewer than two beats.
    ``peaks``: sorted, in memory or held on disk (read a part at a time)."""
    if len(peaks) < 2:
        return None
    if isinstance(peaks, np.ndarray):
        return 60.0 * sampling_rate / float(np.median(np.diff(peaks)))

    def intervals() -> Iterator[torch.Tensor]:
        for s in range(0, len(peaks) - 1, context.BEAT_PART):
            yield torch.from_numpy(np.diff(peaks[s : s + context.BEAT_PART + 1]).astype(np.float64))

    return 60.0 * sampling_rate / median_of_parts(intervals)


def rate_warnings(
    peaks: np.ndarray | Stored, sampling_rate: float, n_samples: int, *, median_bpm: float | None = None
) -> list[str]:
    """What the rate and the beats found say about the settings: a rate under :data:`MIN_ECG_HZ`,
    no beat in over a minute of recording, or a median heart rate outside :data:`PLAUSIBLE_BPM`,
    each most often a wrong sampling rate (or not an ECG). ``peaks`` are sample indices, shape
    ``(n_beats,)``."""
    low = [
        f"the sampling rate of {sampling_rate:g} Hz is under {MIN_ECG_HZ:g} Hz, below which beats are missed and "
        "others found that are none (a QRS spans a sample or two): is the sampling rate right?"
    ]
    return (low if sampling_rate < MIN_ECG_HZ else []) + _beat_rate_warnings(
        peaks, sampling_rate, n_samples, median_bpm
    )


def _beat_rate_warnings(
    peaks: np.ndarray | Stored, sampling_rate: float, n_samples: int, median_bpm: float | None
) -> list[str]:
    """:func:`rate_warnings`' of the beats found: none in over a minute, or a heart rate no heart has."""
    minutes = n_samples / sampling_rate / 60.0
    if peaks.size < 2:
        if minutes > 1.0:
            return [
                f"{peaks.size} beat(s) found in {minutes:.1f} minutes of recording: is it an ECG, and is the "
                f"sampling rate of {sampling_rate:g} Hz right?"
            ]
        return []
    bpm = median_heart_rate(peaks, sampling_rate) if median_bpm is None else median_bpm
    lo, hi = PLAUSIBLE_BPM
    if bpm is None or lo <= bpm <= hi:  # (None: under two beats, said above)
        return []
    return [
        f"the median heart rate is {bpm:.0f} bpm, outside {lo:.0f}-{hi:.0f} bpm: the sampling rate of "
        f"{sampling_rate:g} Hz is most likely wrong (or the recording is not an ECG)"
    ]


def time_warnings(rec: Recording) -> list[str]:
    """What an ECG's time column says of its samples: where its times jump ahead (samples missing
    there, as a wireless recorder drops them, or a clock set forward), the samples either side are
    read back to back, so the beats after it are timed by counting samples, not by the clock, and
    a pause there cannot be seen."""
    report = rec.time_report
    longest = None if report is None else report.longest_gap()
    if report is None or longest is None:
        return []
    seconds, after = longest
    which = "the longest" if report.n_gaps == len(report.gaps) else f"the longest of the first {len(report.gaps)}"
    return [
        f"the time column of {rec.source} jumps ahead {report.n_gaps:,} time(s), {report.missing_steps:,} sample(s) "
        f"missing in all ({which} {seconds:,.4g} s, after {after}): samples dropped or a clock set forward; "
        "the samples either side are read back to back, so the beats after it are timed by counting samples, "
        "and a pause there cannot be seen"
    ]


def record_name(rec: Recording) -> str:
    """The record name of the run's WFDB annotation file: the input's name without its suffix,
    in the letters, digits, ``-`` and ``_`` that WFDB record names allow."""
    name = Path(rec.source).name if rec.source else ""
    stem = Path(name).stem if Path(name).suffix else name
    return re.sub(r"[^-\w]", "_", stem, flags=re.ASCII) or "recording"


def reference_in(ref: ReferenceBeats, rec: Recording, n_samples: int | None = None) -> np.ndarray:
    """The reference beats as sample indices of ``rec`` (of ``n_samples``, when ``rec`` holds only
    a part); a clear error when they do not fit in it."""
    samples = ref.samples_at(rec.fs)
    n = rec.n_samples if n_samples is None else n_samples
    if samples.size and int(samples[-1]) >= n:
        raise DevicepipeError(
            f"reference {ref.source} has beats past the end of {rec.source} (the last at sample "
            f"{int(samples[-1]):,}; the recording has {n:,}): is it this recording's reference, "
            "and is the sampling rate right?"
        )
    return samples


def accuracy_summary(score: BeatScore, source: str, fs: float, n_samples: int) -> dict[str, Any]:
    """``summary.json``'s accuracy: the counts inside the scoring window, and that window."""
    return {
        "reference": source,
        "scoring_window_s": [EDGE_S, n_samples / fs - EDGE_S],
        "tolerance_s": MATCH_TOLERANCE_S,
        "reference_beats_in_window": score.tp + score.fn,
        "beats_found_in_window": score.tp + score.fp,
        **score.to_dict(),
    }


def detection_accuracy(ref: ReferenceBeats, rec: Recording, peaks: np.ndarray) -> dict[str, Any]:
    """``summary.json``'s accuracy of the R peaks ``peaks`` (samples, ``(n,)``) found in the whole
    recording ``rec`` against the reference, as the ``beats`` pipeline gives it."""
    fs, n = rec.fs, rec.n_samples
    return accuracy_summary(evaluate_beats(reference_in(ref, rec), peaks, fs, n_samples=n), ref.source, fs, n)


def reference_counts(
    source: str, truth: np.ndarray, flags: np.ndarray, missed: np.ndarray | None = None
) -> dict[str, Any]:
    """Per reference label (``""``: no reference beat within 150 ms) and per AAMI class (EC57's
    N, S, V, F, Q), the beats scored, the flagged beats, the share flagged and, given ``missed``
    (the labels of the reference beats that no detection matched, :func:`missed_labels`), how
    many of its reference beats were never detected."""
    missed = np.array([], dtype=str) if missed is None else np.asarray(missed, dtype=str)
    labels, classes = {}, {}
    for value in sorted(set(truth.tolist()) | set(missed.tolist())):
        sel = truth == value
        labels[value or "none"] = {"beats": int(sel.sum()), "flagged": int(flags[sel].sum())}
        if value:
            labels[value]["missed"] = int((missed == value).sum())
    aami = np.array([aami_class(v) or "" for v in truth.tolist()], dtype=str)
    aami_missed = np.array([aami_class(v) or "" for v in missed.tolist()], dtype=str)
    for name in AAMI_CLASSES:
        sel = aami == name
        lost = int((aami_missed == name).sum())
        if sel.any() or lost:
            n, k = int(sel.sum()), int(flags[sel].sum())
            classes[name] = {"beats": n, "flagged": k, "flag_rate": k / n if n else 0.0, "missed": lost}
    return {"source": source, "tolerance_s": MATCH_TOLERANCE_S, "labels": labels, "aami": classes}


def missed_labels(reference: np.ndarray, symbols: np.ndarray, found: np.ndarray, fs: float) -> np.ndarray:
    """The labels of the reference beats (``reference``: samples, ``symbols``: their labels) that no
    beat ``found`` (samples) lies within 150 ms of: the beats the run never detected."""
    if not len(reference):
        return np.array([], dtype=str)
    near = label_beats(found, np.full(len(found), "x"), reference, fs)  # (each reference beat's detection)
    return np.asarray(symbols, dtype=str)[near == ""]
