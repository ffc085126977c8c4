"""``multiscale``: the mean distance to the k nearest training rows at several resolutions."""

from __future__ import annotations

import torch

from devicepipe.scorers.base import PyramidScorer, Reference
from devicepipe.scorers.neighbours import MULTISCALE_FLOOR, knn_distance


class MultiscaleScorer(PyramidScorer):
    """The ``knn`` distance at the row's own resolution and averaged down by halves to
    :data:`MULTISCALE_FLOOR` samples, each a robust z-score of its log against the training rows'
    own distances at that resolution (``(log d - median) / (1.4826 MAD)``), the largest of them."""

    name = "multiscale"
    floor = MULTISCALE_FLOOR

    def distances(
        self, rows: torch.Tensor, reference: torch.Tensor, ref: Reference, exclude: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        assert ref.k is not None
        d = knn_distance(rows, reference, ref.k, exclude=exclude, skip_equal=exclude is None)
        return {f"knn{reference.shape[1]}": d}

    def distance_words(self, ref: Reference) -> str:
        return f"its mean Euclidean distance to its {ref.k} nearest of {ref.size:,} training rows at that resolution"
