"""``reconstruction``: the autoencoder's mean squared reconstruction error alone."""

from __future__ import annotations

import torch

from devicepipe.scorers.base import Fitting, Reference, Scorer, reconstruction_words


class ReconstructionScorer(Scorer):
    """The mean squared reconstruction error (averaged over the ensemble's members)."""

    name = "reconstruction"
    uses_reference = False
    leaves_self_out = False
    uses_model = True

    def scores(
        self, recon: torch.Tensor, data: torch.Tensor, ref: Reference, fitting: Fitting | None = None
    ) -> tuple[torch.Tensor, dict[str, tuple[float, float]]]:
        return recon, dict(ref.calibration)

    def meaning(self, ref: Reference, rows: str, units: str) -> str:
        return f"a score is {reconstruction_words(rows, units)}"
