"""``local``: the row's local linear reconstruction error from training rows past its nearest,
at several resolutions (the default scorer)."""

from __future__ import annotations

from typing import Any

import torch

from devicepipe.scorers.base import PyramidScorer, Reference
from devicepipe.scorers.neighbours import LOCAL_FLOOR, local_neighbours, local_residual

LOCAL_WHY = (
    "by the local linear reconstruction error: a row off the shapes the normal rows vary along scores "
    "high even when some normal rows are near it, and a row between normal rows scores low even where "
    "none is near it; it is rebuilt from the rows past its k - 1 nearest, so that a few copies of one "
    "unusual row cannot rebuild each other"
)


class LocalScorer(PyramidScorer):
    """As ``multiscale`` down to :data:`LOCAL_FLOOR` samples, with the row's local linear
    reconstruction error (:func:`local_residual`) in place of the distance, from its
    :func:`local_neighbours` nearest training rows past its ``k - 1`` nearest (a group of up to
    ``k`` similar anomalous training rows cannot rebuild each other)."""

    name = "local"
    floor = LOCAL_FLOOR

    def distances(
        self, rows: torch.Tensor, reference: torch.Tensor, ref: Reference, exclude: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        assert ref.k is not None
        residual = local_residual(
            rows,
            reference,
            local_neighbours(ref.size),
            skip=ref.k - 1,
            exclude=exclude,
            skip_equal=exclude is None,
        )
        return {f"local{reference.shape[1]}": residual}

    def distance_words(self, ref: Reference) -> str:
        assert ref.k is not None
        past = f" past the {ref.k - 1} nearest" if ref.k > 1 else ""
        return (
            f"the distance from it to the nearest weighted mean of its {local_neighbours(ref.size)} nearest{past} "
            f"of {ref.size:,} training rows at that resolution (the weights solved as locally linear embedding "
            "solves them)"
        )

    def why(self) -> list[str]:
        return [*super().why(), LOCAL_WHY]

    def facts(self, ref: Reference) -> dict[str, Any]:
        assert ref.k is not None
        return {"local_neighbours": local_neighbours(ref.size), "local_past_nearest": ref.k - 1}
