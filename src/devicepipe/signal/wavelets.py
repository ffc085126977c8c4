"""Wavelets sampled as tensors."""

from __future__ import annotations

import math

import torch

__all__ = ["ricker"]


def ricker(
    points: int,
    width: float,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The Ricker ("Mexican hat") wavelet, the negative second derivative of a Gaussian.

    ``A * (1 - (t/width)^2) * exp(-t^2 / (2 width^2))`` with ``A = 2 / (sqrt(3 width) pi^(1/4))``,
    sampled at ``t = arange(points) - (points - 1) / 2``: the definition of SciPy's former
    ``scipy.signal.ricker`` (removed in SciPy 1.15).

    Parameters
    ----------
    points : number of samples.
    width : the Gaussian's standard deviation, in samples.

    Returns
    -------
    Tensor of shape ``(points,)``.
    """
    if points < 1:
        raise ValueError(f"ricker(): points must be at least 1, got {points}.")
    if not width > 0:
        raise ValueError(f"ricker(): width must be positive, got {width}.")
    t = torch.arange(points, dtype=torch.float64, device=device) - (points - 1) / 2
    amplitude = 2 / (math.sqrt(3 * width) * math.pi**0.25)
    tsq = (t / width) ** 2
    return (amplitude * (1 - tsq) * torch.exp(-tsq / 2)).to(dtype)
