"""What the pipelines return: :class:`BeatsResult`, :class:`LearnResult`, :class:`DemoResult`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.artifacts.summaries import HolterSummary, RunSummary
from devicepipe.ecg import (
    Beats,
    BeatScore,
)
from devicepipe.pipelines.checks import median_heart_rate


@dataclass(frozen=True)
class BeatsResult:
    """What :func:`run_beats` found and wrote."""

    source: str
    device: torch.device
    sampling_rate: float
    n_samples: int
    channel: str
    peaks: np.ndarray  # int64 sample indices, shape (n_beats,) (of a chunked run: mapped from a temporary file)
    beats: Beats
    seconds: dict[str, float]
    files: dict[str, Path]
    score: BeatScore | None = None
    transfers: dict[str, Any] | None = None  # host-device copies counted (None when not counted)
    warnings: tuple[str, ...] = ()  # what looks wrong with the settings (see rate_warnings)
    median_bpm: float | None = None  # found with the beats (else from the peaks when asked)
    reference: str | None = None  # the reference the beats were scored against (``score``)
    leads: tuple[str, ...] = ()  # the leads the beats were found on together (none: on ``channel`` alone)
    holter: HolterSummary | None = None  # each beat's class counted, and the events (none: read in chunks)

    @property
    def mean_heart_rate_bpm(self) -> float | None:
        """The median heart rate (:func:`median_heart_rate`), in beats per minute."""
        return median_heart_rate(self.peaks, self.sampling_rate) if self.median_bpm is None else self.median_bpm


@dataclass(frozen=True)
class LearnResult:
    """What a learning pipeline wrote: the run directory, its summary, its files."""

    out: Path
    summary: RunSummary  # as written to summary.json (``summary["key"]`` reads a key's JSON form)
    files: dict[str, Path]


@dataclass(frozen=True)
class DemoResult:
    """What :func:`run_demo` simulated, the ``ecg`` run on it, and how many ectopic beats it flagged."""

    run: LearnResult
    input: Path  # the simulated recording
    truth: Path  # its R peaks and their symbols
    n_beats: int
    n_ectopic: int  # simulated ventricular ectopic beats
    ectopic_flagged: int  # of the ectopic beats labelled V by the truth file (within 150 ms), how many were flagged
