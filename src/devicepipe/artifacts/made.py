"""What a run made, for its artifacts to write: :class:`Made`, and :class:`Artifact`, the
declaration of one output file."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from devicepipe.ecg import BeatQuality, Beats
from devicepipe.io import Recording
from devicepipe.signal.windows import Windows

T = TypeVar("T")

#: Each model's losses per epoch: ``[{"train": [...], "val": [...], "seconds": [...]}, ...]``.
Histories = list[dict[str, list[float]]]


@dataclass(frozen=True)
class ScoredRows:
    """Host copies of a model's answers on the rows it scored (beats or windows), ``n`` rows.

    ``emb``: ``(n, latent)`` each row's code (the first model's latent means); ``scores``,
    ``spread`` (the members' disagreement), ``flags`` (bool: above the threshold): ``(n,)``;
    ``effects``: ``(n,)`` how far each row differs from its typical one (scorers that measure
    it; else None). A saved model's rows also have ``tail``, ``(n,)``, the share of its training
    rows scoring at least as high, and ``train_scores``, its training rows' scores."""

    emb: np.ndarray
    scores: np.ndarray
    spread: np.ndarray
    flags: np.ndarray
    effects: np.ndarray | None = None
    tail: np.ndarray | None = None
    train_scores: np.ndarray | None = None


@dataclass(frozen=True)
class RowViews:
    """What the figures and the report show of scored rows (of ``width`` samples each).

    ``extreme_idx``: ``(10,)`` the five highest-scoring rows' positions, then the five lowest's;
    ``top_flagged``: ``(k,)`` the flagged rows' positions by falling score, ``flagged_rows``
    ``(k, width)`` those rows; ``typical``: ``(width,)`` the median row. A VAE's run adds the
    extreme rows as the model takes them and its reconstructions of them (``extreme_rows``,
    ``extreme_recon``, ``(10, model width)``), and the beats it generates (``generated``,
    ``(g, model width)``) across its latent ``grid`` ``(g, latent)`` with the typical beat
    ``centre``; ``grid_towards``: the class (its index in ``BEAT_CLASSES``) the grid runs to
    from the normal beats' code, -1 where it spans the directions the codes spread most."""

    extreme_idx: np.ndarray
    top_flagged: np.ndarray
    flagged_rows: np.ndarray
    typical: np.ndarray
    extreme_rows: np.ndarray | None = None
    extreme_recon: np.ndarray | None = None
    generated: np.ndarray | None = None
    grid: np.ndarray | None = None
    centre: np.ndarray | None = None
    grid_towards: int = -1


@dataclass(frozen=True)
class BeatPlaces:
    """Where a scored run's beats are in its recording (samples).

    ``all_peaks``: ``(n_peaks,)`` every R peak found; ``kept``: which of them were cut into a
    row (a bool mask ``(n_peaks,)`` or indices); ``peaks``: ``(n,)`` the R peaks of the rows;
    ``neighbour_s``: ``(n,)`` the offset (s) of a neighbouring beat whose QRS reaches into each
    row (NaN: none). With a labelled reference: ``reference_peaks``, its beats, and ``truth``,
    ``(n,)`` each row's label (its nearest reference beat's within 150 ms; "" none)."""

    all_peaks: np.ndarray
    peaks: np.ndarray
    kept: np.ndarray
    neighbour_s: np.ndarray | None = None
    reference_peaks: np.ndarray | None = None
    truth: np.ndarray | None = None


@dataclass(frozen=True)
class Made:
    """Host copies of what a run made: what its artifacts are written from. A field a kind of
    run does not make stays at its default.

    ``rows``: a model's answers on its rows; ``views``: what the figures show of them;
    ``places``: where a scored run's beats are; ``days``: a load series' windows ``(n, width)``
    and ``recon`` their reconstructions; ``signal``: the recording's first channel ``(time,)``
    as read (``rec.samples``, which may start at ``rec.start_sample``); ``leading``: the first
    columns of the score tables, each ``(n,)``; ``beat_rate``: Hz of the resampled beat rows;
    ``quality``: the rated beats' quality, their R peaks and the recording's length in samples;
    ``flagged``: the flagged windows drawn in ``days.png``, from the highest score down.
    """

    kind: str
    out: Path
    rows: ScoredRows | None = None
    views: RowViews | None = None
    places: BeatPlaces | None = None
    days: np.ndarray | None = None
    recon: np.ndarray | None = None
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
    def scored(self) -> ScoredRows:
        """The model's answers on the rows (a :class:`KeyError` where the run made none)."""
        return self.need(self.rows, "scored rows")

    @property
    def row_views(self) -> RowViews:
        """What the figures show of the scored rows (a :class:`KeyError` where the run made none)."""
        return self.need(self.views, "rows to show")

    @property
    def beat_places(self) -> BeatPlaces:
        """Where the scored beats are (a :class:`KeyError` where the run made none)."""
        return self.need(self.places, "beats' places")

    @property
    def window_rows(self) -> np.ndarray:
        """A load series' windows ``(n, width)`` (a :class:`KeyError` where the run made none)."""
        return self.need(self.days, "windows")

    @property
    def all_peaks(self) -> np.ndarray | None:
        """Every R peak the run found (samples), where it found beats."""
        return self.peaks if self.peaks is not None else None if self.places is None else self.places.all_peaks

    def need(self, value: T | None, what: str) -> T:
        """``value``, which the artifact being made needs; a :class:`KeyError` naming ``what`` where
        this run did not make it."""
        if value is None:
            raise KeyError(f"the artifacts of a {self.kind} run need its {what}, which it did not make")
        return value

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
