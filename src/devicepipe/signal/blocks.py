"""Reductions over consecutive blocks and over windows of blocks, centred; any device.

The ECG detector summarises a long feature in half-second blocks (their maximum and mean)
and then looks a few blocks either side of each block: :func:`block_reduce` makes the block
summaries without a padded copy, :func:`centred_window` slides a maximum, minimum or mean
over ``window`` blocks centred on each (near the ends, over the blocks that exist).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from devicepipe.signal.peaks import sliding_max, sliding_min

__all__ = ["block_reduce", "centred_window", "neighbour_median", "row_median"]


def block_reduce(x: torch.Tensor, block: int, how: Literal["max", "mean"]) -> torch.Tensor:
    """Reduce ``x`` of shape ``(batch, time)`` over consecutive blocks of ``block`` samples.

    Returns a tensor of shape ``(batch, ceil(time / block))``; the last block may be partial.
    The whole blocks are a view of ``x`` (its last axis must be contiguous): no padded copy.
    """
    if how not in ("max", "mean"):
        raise ValueError(f"block_reduce(): how must be 'max' or 'mean', got {how!r}.")
    batch, n = x.shape
    whole, rest = divmod(n, block)
    parts = []
    if whole and how == "max" and _pooled(x, block):
        parts.append(F.max_pool1d(x[:, None, : whole * block], block, block).squeeze(1))
    elif whole:
        blocks = x[:, : whole * block].view(batch, whole, block)
        parts.append(blocks.amax(-1) if how == "max" else blocks.mean(-1))
    if rest:
        tail = x[:, whole * block :]
        parts.append(tail.amax(-1, keepdim=True) if how == "max" else tail.mean(-1, keepdim=True))
    return torch.cat(parts, -1) if len(parts) > 1 else parts[0]


#: Blocks up to this many samples are reduced by max pooling on the CPU (see :func:`_pooled`).
POOLED_BLOCK = 16
#: Rows up to this many samples are pooled whatever the threads (one row pools on one thread).
POOLED_ROW = 1 << 18


def _pooled(x: torch.Tensor, block: int) -> bool:
    """Whether :func:`block_reduce`'s maxima of short blocks take ``F.max_pool1d`` (the same
    values, NaN included): on the CPU, ``amax`` over a last axis of a few samples runs 2-3x
    slower than pooling, but pooling shares out rows, not samples, among threads, so one long row
    on several threads stays with ``amax``."""
    if x.device.type != "cpu" or block > POOLED_BLOCK or not x.dtype.is_floating_point:
        return False
    return x.shape[0] >= torch.get_num_threads() or x.shape[-1] <= POOLED_ROW


def centred_window(x: torch.Tensor, window: int, how: Literal["max", "min", "mean"]) -> torch.Tensor:
    """The maximum, minimum or mean over ``window`` samples centred on each sample of ``x`` (``(batch, n)``).

    Same shape as ``x``. Sample ``i`` reduces ``x[..., i - (w - 1) // 2 : i + w // 2 + 1]``
    (an even window reaches one sample further right), cut to the samples that exist, where
    ``w`` is ``window`` cut to ``n``.
    """
    if how not in ("max", "min", "mean"):
        raise ValueError(f"centred_window(): how must be 'max', 'min' or 'mean', got {how!r}.")
    window = min(window, x.shape[-1])
    if window <= 1:
        return x
    left = (window - 1) // 2
    pad = (left, window - 1 - left)
    if how == "mean":
        ones = torch.ones(1, 1, window, dtype=x.dtype, device=x.device)
        sums = F.conv1d(F.pad(x, pad).unsqueeze(1), ones).squeeze(1)
        counts = F.conv1d(F.pad(torch.ones_like(x[:1]), pad).unsqueeze(1), ones)
        return sums / counts.squeeze(1)
    padded = F.pad(x, pad, value=-torch.inf if how == "max" else torch.inf)
    return (sliding_max if how == "max" else sliding_min)(padded, window)


def row_median(values: torch.Tensor, rows: torch.Tensor, n_rows: int) -> torch.Tensor:
    """The (lower) median of ``values`` within each row, for values labelled by ``rows``.

    ``values`` and ``rows`` have shape ``(n,)``; returns shape ``(n_rows,)``, 0 for a row
    without any value.
    """
    if n_rows == 1:  # one row: torch's median is the lower one (no sorts by value and by row)
        return values.median().reshape(1) if values.numel() else values.new_zeros(1)
    counts = torch.bincount(rows, minlength=n_rows)
    by_value = torch.argsort(values)
    grouped = by_value[torch.argsort(rows[by_value], stable=True)]  # by row, then by value
    first = torch.cumsum(counts, 0) - counts
    middle = (first + (counts - 1).clamp(min=0) // 2).clamp(max=max(values.numel() - 1, 0))
    out = values[grouped][middle] if values.numel() else values.new_zeros(n_rows)
    return torch.where(counts > 0, out, values.new_zeros(()))


def neighbour_median(
    values: torch.Tensor,
    half: int,
    *,
    rows: torch.Tensor | None = None,
    exclude_self: bool = False,
    block: int = 65_536,
) -> torch.Tensor:
    """The (lower) median of each value's neighbours: the ``half`` values either side, and the
    value itself unless ``exclude_self``; within its row where ``rows`` (sorted, same shape) is
    given. NaN values are left out; NaN where nothing is left. ``values`` has shape ``(m,)``;
    returns ``(m,)``, computed ``block`` values at a time so the windows in memory stay small.
    """
    m = values.numel()
    offsets = torch.arange(-half, half + 1, device=values.device)
    if exclude_self:
        offsets = offsets[offsets != 0]
    out = torch.empty_like(values)
    for first in range(0, m, block):
        own = torch.arange(first, min(m, first + block), device=values.device)
        idx = own[:, None] + offsets
        inside = (idx >= 0) & (idx < m)
        idx = idx.clamp(0, m - 1)
        if rows is not None:
            inside &= rows[idx] == rows[own, None]
        out[own] = torch.where(inside, values[idx], torch.nan).nanmedian(-1).values
    return out
