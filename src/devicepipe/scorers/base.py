"""What a scorer is: the contract every entry of :data:`devicepipe.scorers.SCORER_KINDS` keeps.

A scorer turns rows (scaled and resampled to the model's width, ``(n, width)``) and their
reconstruction errors ``(n,)`` into anomaly scores ``(n,)``, higher more anomalous. The ones that
use the nearest training rows score against a :class:`Reference`; those whose scores are robust
z-scores keep a calibration (a median and a scale of log values, by name), fitted once on the
training rows and stored with the model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from devicepipe.scorers.neighbours import robust_log_scale, robust_z, row_pyramid, typical_size

#: A calibration: by name, the median and robust scale of the log values it standardises.
Calibration = Mapping[str, tuple[float, float]]


@dataclass(frozen=True)
class Reference:
    """The training rows a scorer measures against.

    rows : ``(m, width)`` scaled training rows (None for a scorer that uses none).
    k : the nearest-neighbour count (None without rows).
    calibration : the fitted calibration (empty before ``fit``).
    """

    rows: torch.Tensor | None
    k: int | None
    calibration: Calibration = field(default_factory=dict)

    @property
    def size(self) -> int:
        """How many training rows there are to measure against."""
        return 0 if self.rows is None else int(self.rows.shape[0])


@dataclass(frozen=True)
class Fitting:
    """What ``fit`` adds when the scorer scores the training rows themselves.

    exclude : ``(n,)`` each row's own position among the reference rows (-1: not kept), so that a
        row never counts as its own neighbour.
    train_rows : ``(t,)`` the rows that calibrate a score fitted on the training split only.
    """

    exclude: torch.Tensor
    train_rows: torch.Tensor


def reconstruction_words(rows: str, units: str) -> str:
    """The reconstruction error of ``rows`` in words."""
    return f"the mean squared reconstruction error of {rows} (units: squared {units})"


class Scorer(ABC):
    """One way to score rows. Subclasses set the class attributes and :meth:`scores`."""

    #: The name users give (``--scorer``, ``scorer=``).
    name: ClassVar[str]
    #: Whether it measures against training rows (they are then kept and saved with the model).
    uses_reference: ClassVar[bool] = True
    #: Whether a training row's score leaves that row out, so every training row's score is a
    #: fair one; otherwise only the held-out split's are.
    leaves_self_out: ClassVar[bool] = True
    #: Whether its scores are robust z-scores already (the ``"auto"`` threshold then works on them,
    #: not on their logs).
    z_scores: ClassVar[bool] = False
    #: Whether its scores depend on the trained model (its reconstruction errors): only then does
    #: how well the model learned change the scores and flags.
    uses_model: ClassVar[bool] = False
    #: Whether it measures each row's effect (:meth:`scores_and_effects`), which ``min_effect`` bounds.
    measures_effect: ClassVar[bool] = False

    @abstractmethod
    def scores(
        self, recon: torch.Tensor, data: torch.Tensor, ref: Reference, fitting: Fitting | None = None
    ) -> tuple[torch.Tensor, dict[str, tuple[float, float]]]:
        """The scores ``(n,)`` of the rows ``data`` ``(n, width)`` whose reconstruction errors are
        ``recon`` ``(n,)``, and the calibration: fitted when ``fitting`` is given, else ``ref``'s."""

    def scores_and_effects(
        self, recon: torch.Tensor, data: torch.Tensor, ref: Reference, fitting: Fitting | None = None
    ) -> tuple[torch.Tensor, dict[str, tuple[float, float]], torch.Tensor | None]:
        """:meth:`scores` and, where the scorer measures one, each row's effect ``(n,)``: how large
        its difference is as a share of a typical row's shape; else None."""
        return (*self.scores(recon, data, ref, fitting), None)

    @abstractmethod
    def meaning(self, ref: Reference, rows: str, units: str) -> str:
        """What a score is, in words, for ``rows`` whose values are in ``units``."""

    def why(self) -> list[str]:
        """Why this scorer scores as it does, one reason per item (for a run's summary)."""
        return []

    def facts(self, ref: Reference) -> dict[str, Any]:
        """What a run's summary records of this scorer beyond its name, k and reference rows."""
        return {}

    def label(self, k: int | None) -> str:
        """The scorer in a few words, for a report's facts (a tile: what k means is in the summary)."""
        return self.name if not k else f"{self.name}, k = {k}"


DISTANCE_WHY = (
    "distances to the training rows ranked anomalies better than the reconstruction error on every "
    "one-class task measured (benchmarks/one_class.py), and need no model to have learned normal"
)
PYRAMID_WHY = (
    "at several resolutions: some anomalies differ in fine detail, others in a coarse shape that "
    "noise hides at full resolution; each resolution is calibrated on the training rows' own distances"
)


class DistanceScorer(Scorer):
    """A scorer of distances to the training rows alone."""

    def why(self) -> list[str]:
        return [DISTANCE_WHY]


class PyramidScorer(DistanceScorer):
    """A distance at every resolution of :func:`row_pyramid` down to ``floor`` samples, each as a
    robust z-score of its log against the training rows' own, the largest of them."""

    z_scores = True
    measures_effect = True
    #: The coarsest resolution, in samples per row.
    floor: ClassVar[int]

    @abstractmethod
    def distances(
        self, rows: torch.Tensor, reference: torch.Tensor, ref: Reference, exclude: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        """The distances ``(n,)`` at one resolution, by calibration name (``exclude``: in ``fit``,
        each row's own reference row)."""

    @abstractmethod
    def distance_words(self, ref: Reference) -> str:
        """The distance at one resolution, in words."""

    def scores(
        self, recon: torch.Tensor, data: torch.Tensor, ref: Reference, fitting: Fitting | None = None
    ) -> tuple[torch.Tensor, dict[str, tuple[float, float]]]:
        scores, calibration, _ = self.scores_and_effects(recon, data, ref, fitting)
        return scores, calibration

    def scores_and_effects(
        self, recon: torch.Tensor, data: torch.Tensor, ref: Reference, fitting: Fitting | None = None
    ) -> tuple[torch.Tensor, dict[str, tuple[float, float]], torch.Tensor]:
        """The scores, the calibration, and each row's effect: its distance at the resolution
        where its z-score is largest, over :func:`typical_size` of the training rows there."""
        assert ref.rows is not None
        exclude = None if fitting is None else fitting.exclude
        calibration = dict(ref.calibration)
        z, effects = [], []
        levels = zip(row_pyramid(data, self.floor), row_pyramid(ref.rows, self.floor), strict=True)
        for rows, reference in levels:
            size = typical_size(reference)
            for name, d in self.distances(rows, reference, ref, exclude).items():
                if fitting is not None:
                    calibration[name] = robust_log_scale(d)
                z.append(robust_z(d, *calibration[name]))
                effects.append(d / size)
        stacked = torch.stack(z)
        largest = stacked.argmax(0, keepdim=True)
        return stacked.amax(0), calibration, torch.stack(effects).gather(0, largest)[0]

    def meaning(self, ref: Reference, rows: str, units: str) -> str:
        assert ref.rows is not None
        widths = ", ".join(str(level.shape[1]) for level in row_pyramid(ref.rows[:1], self.floor))
        return (
            f"a score is the largest, over {rows} at {widths} samples (averaged down by halves), of "
            f"{self.distance_words(ref)}, each as a robust z-score against the training rows' own values there "
            "(units: robust standard deviations of the log distance)"
        )

    def why(self) -> list[str]:
        return [*super().why(), PYRAMID_WHY]
