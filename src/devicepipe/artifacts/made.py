"""What a run made, for its artifacts to write: :class:`Made`, and :class:`Artifact`, the
declaration of one output file."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.ecg import BeatQuality, Beats
from devicepipe.io import Recording
from devicepipe.signal.windows import Windows

#: Each model's losses per epoch: ``[{"train": [...], "val": [...], "seconds": [...]}, ...]``.
Histories = list[dict[str, list[float]]]


@dataclass(frozen=True)
class Made:
    """Host copies of what a run made: what its artifacts are written from. A field a kind of
    run does not make stays at its default.

    ``host``: the run's arrays by name (``peaks`` ``(n,)`` samples, ``scores`` and ``flags``
    ``(n,)``, ``emb`` ``(n, latent)``, ``extreme_rows``, ``days``, ``truth`` ...; see each
    pipeline); ``signal``: the recording's first channel ``(time,)`` as read (``rec.samples``,
    which may start at ``rec.start_sample``); ``leading``: the first columns of the score
    tables, each ``(n,)``; ``beat_rate``: Hz of the resampled beat rows; ``quality``: the rated
    beats' quality, their R peaks and the recording's length in samples; ``flagged``: the
    flagged windows drawn in ``days.png``, from the highest score down.
    """

    kind: str
    out: Path
    host: Mapping[str, np.ndarray] = field(default_factory=dict)
    rec: Recording | None = None
    signal: np.ndarray | None = None
    histories: Histories | None = None
    threshold: float = float("nan")
    warning: str | None = None
    leading: Mapping[str, Any] | None = None
    beat_rate: float | None = None
    peaks: np.ndarray | None = None
    beats: Beats | None = None
    reference: np.ndarray | None = None
    quality: tuple[BeatQuality, torch.Tensor, int] | None = None
    wins: Windows | None = None
    unit_name: str = ""
    flagged: np.ndarray | None = None
    pointwise: bool = False
    n_recordings: int = 0
    recordings: Sequence[Mapping[str, Any]] | None = None  # a population's recordings (see recordings.parquet)
    detector: Any = None  # a fitted BeatAnomalyDetector, for model.pt
    geometry: Mapping[str, Any] | None = None  # what rows the model takes (see BeatAnomalyDetector.save)
    classes: np.ndarray | None = None  # each R peak's AAMI class, ``(n,)`` (an ECG run in one piece)
    events: Sequence[Any] | None = None  # the Holter events (devicepipe.heart.holter.Event), in time order

    @property
    def fs(self) -> float:
        """The recording's sampling rate, Hz (of an ECG run, whose Made holds its recording)."""
        assert self.rec is not None and self.rec.sampling_rate is not None
        return float(self.rec.sampling_rate)

    @property
    def windows(self) -> Windows:
        """The windows of a load-series run."""
        assert self.wins is not None
        return self.wins


#: What an artifact makes for a run: a matplotlib figure (saved as the artifact's PNG), the
#: path of a file it wrote, or None (nothing to write this time).
Make = Callable[[Made], Any]


#: The sections of ``report.html`` that show figures, by key (a page gives each its title):
#: the beats found, the Holter events, what the model learned, the beats it generates, heart rate
#: and beats beside a model's answers, scores against the model's training rows, the anomalous
#: windows of a series, the windows' codes, and training.
REPORT_SECTIONS = ("beats", "events", "learned", "generated", "heart", "scores", "windows", "codes", "training")


@dataclass(frozen=True)
class Artifact:
    """One output file of a run directory: its name, what it answers (the caption beside it in
    ``report.html``), and how each kind of run that writes it makes it (``makes``: kind ->
    :data:`Make`; none for files written elsewhere, such as the benchmark's charts).
    ``also``: further names the same figure is saved under (``generated.pdf``). ``shown``: for a
    figure, the section of each kind of run's page that shows it (kind -> one of
    :data:`REPORT_SECTIONS`)."""

    name: str
    caption: str
    makes: Mapping[str, Make] = field(default_factory=dict)
    also: tuple[str, ...] = ()
    shown: Mapping[str, str] = field(default_factory=dict)
