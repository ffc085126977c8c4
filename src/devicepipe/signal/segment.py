"""Cut segments out of a long signal into a fixed-width matrix, vectorised with a gather."""

from __future__ import annotations

import torch

__all__ = ["segment", "segment_between"]


def segment(
    x: torch.Tensor, positions: torch.Tensor, *, before: int, after: int, fill: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Windows ``x[p - before : p + after]`` around each position.

    Parameters
    ----------
    x : Tensor of shape ``(time,)`` or ``(channels, time)``.
    positions : int tensor of shape ``(n,)``, sample indices (any order).
    before, after : samples taken before (excluded the position) and from the position on.

    Returns
    -------
    windows : Tensor of shape ``(n, before + after)`` (or ``(n, channels, before + after)``);
        samples beyond either end of ``x`` are ``fill``.
    valid : bool Tensor of shape ``(n, before + after)``, False where a window ran past an end.
    """
    if before < 0 or after < 0 or before + after == 0:
        raise ValueError(f"segment(): before and after must be >= 0 with a positive sum, got {before}, {after}.")
    n = x.shape[-1]
    positions = positions.to(device=x.device, dtype=torch.int64)
    idx = positions[:, None] + torch.arange(-before, after, device=x.device)  # (n, width)
    valid = (idx >= 0) & (idx < n)
    gathered = x[..., idx.clamp(0, n - 1)]  # (..., n, width)
    if x.ndim == 2:
        gathered = gathered.permute(1, 0, 2)  # (n, channels, width)
        return torch.where(valid[:, None, :], gathered, fill), valid
    return torch.where(valid, gathered, fill), valid


def segment_between(
    x: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, *, width: int, fill: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Variable-length segments ``x[s : s + length]``, each zero-padded (``fill``) to ``width``.

    Segments longer than ``width`` are cut at ``width``; samples past the end of ``x`` are
    ``fill``.

    Parameters
    ----------
    x : Tensor of shape ``(time,)``.
    starts, lengths : int tensors of shape ``(n,)``.

    Returns
    -------
    segments : Tensor of shape ``(n, width)``.
    valid : bool Tensor of shape ``(n, width)``, True on the samples taken from ``x``.
    """
    if x.ndim != 1:
        raise ValueError(f"segment_between(): x must be 1-D (time,), got shape {tuple(x.shape)}.")
    n = x.shape[-1]
    starts = starts.to(device=x.device, dtype=torch.int64)
    lengths = lengths.to(device=x.device, dtype=torch.int64)
    offset = torch.arange(width, device=x.device)
    idx = starts[:, None] + offset
    valid = (offset < lengths[:, None]) & (idx >= 0) & (idx < n)
    return torch.where(valid, x[idx.clamp(0, n - 1)], fill), valid
