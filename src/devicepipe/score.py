"""Embeddings, reconstruction errors and anomaly flags from trained models (one or an ensemble)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from devicepipe.errors import DevicepipeError

__all__ = ["Scores", "anomaly_threshold", "embed", "reconstruct", "reconstruction_error", "score"]


@torch.no_grad()
def embed(model: nn.Module, x: torch.Tensor, *, batch_size: int = 1024) -> torch.Tensor:
    """Latent means of ``x`` (shape ``(n, ...)``) -> ``(n, latent)``, in eval mode."""
    was = model.training
    model.eval()
    out = torch.cat([model.encode(x[i : i + batch_size])[0] for i in range(0, x.shape[0], batch_size)])
    model.train(was)
    return out


@torch.no_grad()
def reconstruct(model: nn.Module, x: torch.Tensor, *, batch_size: int = 1024) -> torch.Tensor:
    """Reconstructions of ``x`` from the latent means (no sampling), same shape as ``x`` rows."""
    was = model.training
    model.eval()
    out = torch.cat([model(x[i : i + batch_size])[0] for i in range(0, x.shape[0], batch_size)])
    model.train(was)
    return out


def reconstruction_error(model: nn.Module, x: torch.Tensor, *, batch_size: int = 1024) -> torch.Tensor:
    """Mean squared reconstruction error per row, shape ``(n,)``."""
    recon = reconstruct(model, x, batch_size=batch_size)
    return (recon - x.reshape(recon.shape)).square().mean(-1)


def anomaly_threshold(train_scores: torch.Tensor, percentile: float = 99.0) -> float:
    """The ``percentile`` of the training rows' scores (linear interpolation)."""
    if not 0 < percentile < 100:
        raise DevicepipeError(f"anomaly_threshold(): percentile must be within (0, 100), got {percentile}.")
    if train_scores.numel() == 0:
        raise DevicepipeError("anomaly_threshold(): no training scores to take a percentile of.")
    return float(torch.quantile(train_scores.double(), percentile / 100.0))


@dataclass(frozen=True)
class Scores:
    """Per-row results: ``embeddings`` ``(n, latent)``, ``scores`` ``(n,)`` (ensemble mean),
    ``spread`` ``(n,)`` (ensemble standard deviation; zeros for one model), ``threshold``, ``flags``."""

    embeddings: torch.Tensor
    scores: torch.Tensor
    spread: torch.Tensor
    threshold: float
    flags: torch.Tensor


def score(
    models: nn.Module | list[nn.Module],
    x: torch.Tensor,
    *,
    train_rows: torch.Tensor | None = None,
    percentile: float = 99.0,
) -> Scores:
    """Score every row of ``x`` with one model or an ensemble.

    The threshold is the ``percentile`` of the scores of ``train_rows`` (indices or a mask;
    all rows when None); rows scoring above it are flagged. Embeddings are the first
    member's latent means.
    """
    members = models if isinstance(models, list) else [models]
    errors = torch.stack([reconstruction_error(m, x) for m in members])  # (members, n)
    mean = errors.mean(0)
    spread = errors.std(0, unbiased=False) if len(members) > 1 else torch.zeros_like(mean)
    reference = mean if train_rows is None else mean[train_rows]
    threshold = anomaly_threshold(reference, percentile)
    return Scores(embed(members[0], x), mean, spread, threshold, mean > threshold)
