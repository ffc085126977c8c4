"""The classes stage of every ECG pipeline: each beat's AAMI class and the Holter summary they make."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from devicepipe.ecg.classes import BEAT_CLASSES, BeatClasses, ecg_classes
from devicepipe.holter import Holter, holter
from devicepipe.io import Recording
from devicepipe.pipelines.context import _Run

#: How the classes are found, in a summary's words.
CLASSES_WORDS = (
    "AAMI EC57 classes from rhythm (each beat's interval before and after against the local one) "
    "and shape (QRS families, QRS width, the P wave) on the lead the beats were cut from"
)


@dataclass(frozen=True)
class Labelled:
    """Each beat's class and the Holter summary, host arrays of shape ``(n_peaks,)``."""

    classes: BeatClasses
    holter: Holter

    @property
    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """The beat table's ``class`` and ``reason`` columns."""
        return self.classes.labels, self.classes.reasons

    def summary(self) -> dict[str, Any]:
        """``summary.json``'s ``holter``: what it is, the classes' meaning, the summary."""
        return {"method": CLASSES_WORDS, "classes": BEAT_CLASSES, **self.holter.to_dict()}


def label_beats(run: _Run, rec: Recording, peaks: torch.Tensor) -> Labelled:
    """Every R peak of ``rec`` (one lead, ``(time,)``) classed, and the Holter summary of them."""
    fs = rec.sampling_rate
    with run.stage("classes"):
        classes = ecg_classes(rec.samples, peaks, fs)
        t = peaks.detach().cpu().numpy().astype(np.float64) / fs
        summary = holter(t, classes.labels, classes.irregular, rec.n_samples / fs)
    return Labelled(classes, summary)
