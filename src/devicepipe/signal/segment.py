"""Cut segments out of a long signal into a fixed-width matrix, without a loop per segment.

Rows that lie wholly inside the signal are taken from ``x.unfold(-1, width, 1)`` (a strided
view, so picking rows copies just those rows); only rows that run past either end go
through an index gather. A gather of every element needs an int64 index as large as the
output: 16 times slower for 80 k beats of 256 samples on a 2-core CPU.
"""

from __future__ import annotations

import torch

__all__ = ["rows_at", "segment", "segment_between"]


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
    width = before + after
    positions = positions.to(device=x.device, dtype=torch.int64)
    starts = positions - before
    offset = torch.arange(width, device=x.device)
    valid = (offset >= -starts[:, None]) & (offset < n - starts[:, None])
    out = rows_at(x, starts, width, fill)
    return out, valid


def rows_at(x: torch.Tensor, starts: torch.Tensor, width: int, fill: float | None = 0.0) -> torch.Tensor:
    """``x[..., s : s + width]`` for each start (int64 ``(n,)``), ``fill`` beyond the ends (None:
    the end samples repeated). Rows inside ``x`` are copied from a strided view of it, so no
    ``(n, width)`` index is built (a day's beats' index took 150 MB and half a second).

    Returns ``(n, width)``, or ``(n, channels, width)`` for a ``(channels, time)`` ``x``.
    """
    n = x.shape[-1]
    inside = (starts >= 0) & (starts + width <= n)
    shape = (starts.shape[0], *x.shape[:-1], width)
    if width > n:
        out = torch.full(shape, 0.0 if fill is None else fill, dtype=x.dtype, device=x.device)
    else:
        windows = x.unfold(-1, width, 1)  # (..., n - width + 1, width), a view
        picked = windows[..., starts.clamp(0, n - width), :]  # (..., n_rows, width)
        out = picked.movedim(-2, 0) if x.ndim == 2 else picked
        out = out.contiguous()
    edge = torch.nonzero(~inside).squeeze(1)
    if edge.numel():  # rows running past an end: gather those few element by element
        idx = starts[edge, None] + torch.arange(width, device=x.device)
        ok = (idx >= 0) & (idx < n)
        vals = x[..., idx.clamp(0, n - 1)]  # (..., n_edge, width)
        vals = vals.movedim(-2, 0) if x.ndim == 2 else vals
        mask = ok[:, None, :] if x.ndim == 2 else ok
        if fill is not None:
            vals = torch.where(mask, vals, torch.as_tensor(fill, dtype=x.dtype, device=x.device))
        out[edge] = vals
    return out


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
    # comparisons broadcast straight to bool: no (n, width) int64 index is built
    beyond = offset >= lengths[:, None]
    if starts.numel() and not bool(((starts >= 0) & (starts + lengths.clamp(max=width) <= n)).all()):
        beyond |= (offset < -starts[:, None]) | (offset >= n - starts[:, None])  # some rows run past an end
    out = rows_at(x, starts, width, fill)
    out.masked_fill_(beyond, fill)
    return out, ~beyond
