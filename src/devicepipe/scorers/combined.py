"""``combined``: the mean of the reconstruction error's and the knn distance's robust z-scores."""

from __future__ import annotations

import torch

from devicepipe.scorers.base import Fitting, Reference, Scorer, reconstruction_words
from devicepipe.scorers.knn import knn_scores, knn_words
from devicepipe.scorers.neighbours import robust_log_scale, robust_z


class CombinedScorer(Scorer):
    """The mean of two robust z-scores against the training split: of the reconstruction error and
    of the ``knn`` distance (calibrated on the training split, since the reconstruction error is
    fair only on rows that did not steer training)."""

    name = "combined"
    leaves_self_out = False
    uses_model = True
    z_scores = True

    def scores(
        self, recon: torch.Tensor, data: torch.Tensor, ref: Reference, fitting: Fitting | None = None
    ) -> tuple[torch.Tensor, dict[str, tuple[float, float]]]:
        parts = {"recon": recon, "knn": knn_scores(data, ref, fitting)}
        calibration = dict(ref.calibration)
        if fitting is not None:
            calibration = {name: robust_log_scale(values[fitting.train_rows]) for name, values in parts.items()}
        z = [robust_z(values, *calibration[name]) for name, values in parts.items()]
        return (z[0] + z[1]) / 2, calibration

    def meaning(self, ref: Reference, rows: str, units: str) -> str:
        recon, knn = reconstruction_words(rows, units), knn_words(ref, rows, units)
        return f"a score is the mean of two robust z-scores against the training rows: of {recon}, and of {knn}"
