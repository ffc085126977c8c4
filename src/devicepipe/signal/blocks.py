"""Reductions over consecutive blocks and over windows of blocks, centred; any device.

The ECG detector summarises a long feature in half-second blocks (their maximum and mean)
and then looks a few blocks either side of each block: :func:`block_reduce` makes the block
summaries without a padded copy, :func:`centred_window` slides a maximum, minimum or mean
over ``window`` blocks centred on each (near the ends, over the blocks that exist).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from devicepipe.signal.peaks import sliding_max, sliding_min

__all__ = [
    "block_reduce",
    "centred_window",
    "lower_median_of_parts",
    "median_of_parts",
    "neighbour_median",
    "row_median",
]


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


#: Values :func:`lower_median_of_parts` gathers in memory rather than select over the parts.
MEDIAN_HELD = 1 << 18

#: Bits of the order key :func:`lower_median_of_parts` settles in each pass over the parts.
_DIGIT_BITS = 16


def _order_key(x: torch.Tensor) -> torch.Tensor:
    """Floats as int64 keys in the same order (IEEE bits; a negative's magnitude bits reversed)."""
    bits = {torch.float32: torch.int32, torch.float64: torch.int64}[x.dtype]
    key = x.view(bits).to(torch.int64)
    flip = (1 << (torch.finfo(x.dtype).bits - 1)) - 1
    return torch.where(key < 0, key ^ flip, key)


def _float_of_key(key: int, dtype: torch.dtype) -> torch.Tensor:
    flip = (1 << (torch.finfo(dtype).bits - 1)) - 1
    bits = {torch.float32: torch.int32, torch.float64: torch.int64}[dtype]
    return torch.tensor(key ^ flip if key < 0 else key, dtype=bits).view(dtype)


def lower_median_of_parts(parts: Callable[[], Iterable[torch.Tensor]], *, held: int | None = None) -> torch.Tensor:
    """The lower median (the ``(n - 1) // 2``-th smallest, as ``torch.median`` gives it) of
    float values that come in parts, with memory that does not grow with their number.

    ``parts()`` gives the values (float32 or float64 tensors, any shapes, no NaN) anew on each
    call. Up to ``held`` values (default :data:`MEDIAN_HELD`) are simply gathered and their median
    taken; past that, ``parts()``
    is called 2 more times for float32, 4 for float64: an exact radix selection, 16 bits of the
    value's order key settled per pass by a histogram. Returns a 0-d tensor of that dtype on the
    CPU (``-0.0`` and ``0.0`` are told apart in the selection, equal to any comparison).
    """
    count, dtype, gathered = _gather(parts, held)
    if gathered is not None:
        return gathered.median()
    return _select(parts, dtype, (count - 1) // 2)


def median_of_parts(parts: Callable[[], Iterable[torch.Tensor]], *, held: int | None = None) -> float:
    """The median as NumPy takes it (the mean of the two middle values of an even count) of
    values that come in parts, as :func:`lower_median_of_parts` selects them."""
    count, dtype, gathered = _gather(parts, held)
    if gathered is not None:
        return float(np.median(gathered.numpy()))
    lower, upper = (_select(parts, dtype, (count - 1) // 2), _select(parts, dtype, count // 2))
    return float(np.mean(torch.stack([lower, upper]).numpy()))  # (in the values' dtype, as NumPy's)


def _gather(
    parts: Callable[[], Iterable[torch.Tensor]], held: int | None
) -> tuple[int, torch.dtype, torch.Tensor | None]:
    """The values' count and dtype, and all of them (on the CPU) when there are at most ``held``."""
    held = MEDIAN_HELD if held is None else held
    dtype, count, gathered = None, 0, []
    for part in parts():
        dtype, count = part.dtype, count + part.numel()
        if count <= held:
            gathered.append(part.reshape(-1).cpu())
        else:
            gathered.clear()
    if dtype is None or count == 0:
        raise ValueError("lower_median_of_parts(): no values.")
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"lower_median_of_parts(): float32 or float64 values, not {dtype}.")
    return count, dtype, torch.cat(gathered) if gathered else None


def _select(parts: Callable[[], Iterable[torch.Tensor]], dtype: torch.dtype, rank: int) -> torch.Tensor:
    """The ``rank``-th smallest of the values (0 the smallest), by radix selection."""
    prefix = 0  # the key's bits settled so far (signed: the top digit carries the sign)
    bits = torch.finfo(dtype).bits
    digits = 1 << _DIGIT_BITS
    for shift in range(bits - _DIGIT_BITS, -1, -_DIGIT_BITS):
        top = shift == bits - _DIGIT_BITS
        hist = torch.zeros(digits, dtype=torch.int64)
        for part in parts():
            key = _order_key(part.reshape(-1))
            if not top:
                key = key[(key >> (shift + _DIGIT_BITS)) == prefix]
            digit = (key >> shift) + digits // 2 if top else (key >> shift) & (digits - 1)
            hist += torch.bincount(digit, minlength=digits).cpu()
        below = torch.cumsum(hist, 0)
        d = int(torch.searchsorted(below, rank, right=True))  # the first digit whose count passes rank
        rank -= int(below[d - 1]) if d else 0
        prefix = d - digits // 2 if top else (prefix << _DIGIT_BITS) | d
    return _float_of_key(prefix, dtype)
