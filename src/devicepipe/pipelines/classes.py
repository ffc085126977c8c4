"""The classes stage of every ECG pipeline: each beat's AAMI class and the Holter summary they make."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from devicepipe.ecg.classes import (
    BEAT_CLASSES,
    CLIPPED,
    MIN_BEATS,
    PACED,
    BeatClasses,
    ecg_classes_chunked,
)
from devicepipe.ecg.flat import flat_stretches, flat_stretches_read
from devicepipe.ecg.several_leads import agree_on_ventricular, ecg_classes_leads
from devicepipe.heart.holter import Holter, holter_summary
from devicepipe.io import Recording
from devicepipe.pipelines.context import Run

#: How the classes are found, in a summary's words.
CLASSES_WORDS = (
    "AAMI EC57 classes from rhythm (each beat's interval before and after against the local one) "
    "and shape (QRS families, QRS width, the P wave) on the lead the beats were cut from; with several "
    "leads, V only where most leads that read the beat call it V"
)


#: The shortest part of a recording read in chunks that the classes read at a time, s (a few MB).
CLASSES_PART_S = 600.0
#: A heart rate over this (bpm) is a tachycardia.
TACHYCARDIA_BPM = 100.0
#: The share of the beats in one shape family over which a recording is said to have one QRS shape.
ONE_SHAPE = 0.95


@dataclass(frozen=True)
class Labelled:
    """Each beat's class and the Holter summary, host arrays of shape ``(n_peaks,)``."""

    classes: BeatClasses
    holter: Holter
    no_signal: np.ndarray | None = None  # (k, 2) s: stretches where nothing was recorded

    @property
    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """The beat table's ``class`` and ``reason`` columns."""
        return self.classes.labels, self.classes.reasons

    @property
    def warnings(self) -> list[str]:
        """What makes the classes less than they seem: too few beats, or mostly unclassifiable ones."""
        n, q = self.holter.beats, self.holter.counts["Q"]
        said = []
        if self.no_signal is not None and len(self.no_signal):
            total = float((self.no_signal[:, 1] - self.no_signal[:, 0]).sum())
            a = self.no_signal[0, 0]
            first = f"{int(a // 3600)}:{int(a // 60 % 60):02d}:{int(a % 60):02d}"
            said.append(
                f"no signal for {total:,.0f} s in {len(self.no_signal):,} stretch(es), the first at {first} "
                "(a lead off or a flat line): the rhythm cannot be read there, and no pause is counted across it"
            )
        if n < MIN_BEATS:
            return [*said, f"{n} beats are too few to tell which shape is normal: every beat is Q (unclassifiable)"]
        clipped = int(np.count_nonzero(self.classes.reasons == CLIPPED))
        if clipped:
            said.append(
                f"{clipped:,} of {n:,} beats have their QRS cut flat at the signal's limit (an amplifier or converter "
                "that saturated): their shape cannot be read, and they are Q (unclassifiable) where no other lead "
                "reads them; record at a lower gain, or choose a lead (channel) that stays within its range"
            )
            q -= clipped
        paced = int(np.count_nonzero(self.classes.reasons == PACED))
        if paced:
            said.append(
                f"{paced:,} of {n:,} beats follow a pacemaker's stimulus: they are paced, and Q (unclassifiable) as "
                "AAMI EC57 classes paced beats; their times still give the heart rate and the rhythm"
            )
            q -= paced
        if q >= n / 2:
            return [
                *said,
                f"{q:,} of {n:,} beats are Q (unclassifiable): the lead they were cut from has poor signal around "
                "them (flat, noisy or moving); choose another lead (channel) for classes that can be read",
            ]
        return [*said, *self._fast_and_one_shape()]

    def _fast_and_one_shape(self) -> list[str]:
        """A warning where every beat is fast and of one shape: nothing to compare the QRS with."""
        h, c = self.holter, self.classes
        slowest = h.min_hr_bpm if h.min_hr_bpm is not None else h.mean_hr_bpm
        if slowest is None or slowest <= TACHYCARDIA_BPM or c.normal_family < 0:
            return []
        if np.mean(c.family == c.normal_family) < ONE_SHAPE:
            return []
        return [
            f"the heart rate stays over {TACHYCARDIA_BPM:g} bpm (at least {slowest:.0f}) and every beat has one QRS "
            "shape: with no other beat to compare it with, a ventricular tachycardia cannot be told from a fast "
            "supraventricular rhythm (with or without bundle-branch block), and its beats are classed N; read the strip"
        ]

    def summary(self) -> dict[str, Any]:
        """``summary.json``'s ``holter``: what it is, the classes' meaning, the summary, its warnings."""
        return {"method": CLASSES_WORDS, "classes": BEAT_CLASSES, **self.holter.to_dict(), "warnings": self.warnings}


def label_beats_chunked(
    run: Run, reads: list[Callable[[int, int], torch.Tensor]], n_samples: int, peaks: Any, fs: float, chunk: int
) -> Labelled:
    """:func:`label_beats` of a recording read ``chunk`` samples at a time (``reads``: a
    ``read(start, stop)`` per lead, the beats' own first), its R peaks ``peaks`` held on disk:
    the same classes and summary."""
    part = max(chunk, round(CLASSES_PART_S * fs))  # (a tiny chunk would read its margins many times over)
    with run.stage("classes", count=False):  # (chunks cross to the device in read(), counted there)
        per_lead = [ecg_classes_chunked(read, n_samples, peaks, fs, chunk=part) for read in reads]
        classes = per_lead[0] if len(per_lead) == 1 else agree_on_ventricular(per_lead)
        t = np.asarray(peaks[:], dtype=np.float64) / fs

        def every_lead(a: int, b: int) -> torch.Tensor:
            return torch.stack([read(a, b) for read in reads]) if len(reads) > 1 else reads[0](a, b)

        flat = flat_stretches_read(every_lead, n_samples, fs, chunk=part)
        summary = holter_summary(t, classes.labels, classes.irregular, n_samples / fs, classes.not_beats, flat)
    return Labelled(classes, summary, flat)


def label_beats(run: Run, rec: Recording, peaks: torch.Tensor) -> Labelled:
    """Every R peak of ``rec`` (one lead ``(time,)``, or the leads the beats were found on
    ``(leads, time)``, classed on each and agreed) classed, and the Holter summary of them."""
    fs = rec.fs
    with run.stage("classes"):
        classes = ecg_classes_leads(rec.samples, peaks, fs)
        t = peaks.detach().cpu().numpy().astype(np.float64) / fs
        flat = flat_stretches(rec.samples, fs)
        summary = holter_summary(t, classes.labels, classes.irregular, rec.n_samples / fs, classes.not_beats, flat)
    return Labelled(classes, summary, flat)
