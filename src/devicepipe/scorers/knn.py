"""``knn``: the mean Euclidean distance to the k nearest training rows."""

from __future__ import annotations

import torch

from devicepipe.scorers.base import DistanceScorer, Fitting, Reference
from devicepipe.scorers.neighbours import knn_distance


def knn_words(ref: Reference, rows: str, units: str) -> str:
    """The ``knn`` distance of ``rows`` in words."""
    nearest = f"its {ref.k} nearest of {ref.size:,} training rows"
    return f"the mean Euclidean distance from {rows} to {nearest} (units: {units})"


def knn_scores(data: torch.Tensor, ref: Reference, fitting: Fitting | None) -> torch.Tensor:
    """The mean distance ``(n,)`` from each row of ``data`` to its ``ref.k`` nearest reference
    rows; in ``fit``, a row's own reference row left out."""
    assert ref.rows is not None and ref.k is not None
    exclude = None if fitting is None else fitting.exclude
    return knn_distance(data, ref.rows, ref.k, exclude=exclude, skip_equal=fitting is None)


class KnnScorer(DistanceScorer):
    """The mean Euclidean distance from the (scaled, resampled) row to its k nearest training rows
    (a training row's own score leaves itself out)."""

    name = "knn"

    def scores(
        self, recon: torch.Tensor, data: torch.Tensor, ref: Reference, fitting: Fitting | None = None
    ) -> tuple[torch.Tensor, dict[str, tuple[float, float]]]:
        return knn_scores(data, ref, fitting), dict(ref.calibration)

    def meaning(self, ref: Reference, rows: str, units: str) -> str:
        return f"a score is {knn_words(ref, rows, units)}"
