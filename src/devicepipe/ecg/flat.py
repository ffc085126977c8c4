"""Stretches with no signal: a lead off, a disconnected electrode, a recorder holding its last value.

A living heart's ECG is never exactly constant: even asystole shows baseline noise of a few
quantisation steps. Where every lead holds one value for :data:`FLAT_MIN_S` or more, nothing
was recorded, and the rhythm there cannot be read: no beat is found in it, and the interval
across it is no pause (:func:`devicepipe.heart.holter.holter_summary`'s ``no_signal``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from devicepipe.signal.runs import true_runs

__all__ = ["FLAT_BLOCK_S", "FLAT_MIN_S", "flat_blocks", "flat_stretches", "flat_stretches_read"]

#: Blocks (s) whose samples are compared: a block of one value on every lead is flat.
FLAT_BLOCK_S = 0.25
#: The shortest flat stretch reported, s: as long as the shortest pause (:data:`devicepipe.heart.holter.PAUSE_S`),
#: so no shorter one can fake a pause.
FLAT_MIN_S = 2.0


def _block(sampling_rate: float) -> int:
    return max(1, round(FLAT_BLOCK_S * sampling_rate))


def flat_blocks(x: torch.Tensor, sampling_rate: float) -> np.ndarray:
    """Whether each block of :data:`FLAT_BLOCK_S` of ``x`` (``(time,)`` or ``(leads, time)``) holds
    one value on every lead, ``(ceil(time / block),)`` bool on the host (a last partial block
    judged on its samples)."""
    leads = x.reshape(-1, x.shape[-1])
    block, n = _block(sampling_rate), leads.shape[-1]
    whole = n - n % block
    parts = leads[:, :whole].reshape(leads.shape[0], -1, block)  # (a view where the signal is contiguous)
    flat = (parts.amax(-1) == parts.amin(-1)).all(0)
    if whole < n:  # the last, partial block on its own samples
        tail = leads[:, whole:]
        flat = torch.cat([flat, (tail.amax(-1) == tail.amin(-1)).all(0, keepdim=True)])
    return flat.cpu().numpy()


def _stretches(flat: np.ndarray, sampling_rate: float, n_samples: int) -> np.ndarray:
    block = _block(sampling_rate)
    out = [(a * block / sampling_rate, min(b * block, n_samples) / sampling_rate) for a, b in true_runs(flat)]
    return np.array([s for s in out if s[1] - s[0] >= FLAT_MIN_S], dtype=np.float64).reshape(-1, 2)


def flat_stretches(x: torch.Tensor, sampling_rate: float) -> np.ndarray:
    """The stretches of ``x`` (``(time,)`` or ``(leads, time)``) with no signal on any lead, at
    least :data:`FLAT_MIN_S` long: ``(k, 2)`` start and end in seconds (to a block's precision)."""
    return _stretches(flat_blocks(x, sampling_rate), sampling_rate, x.shape[-1])


def flat_stretches_read(
    read: Callable[[int, int], torch.Tensor], n_samples: int, sampling_rate: float, *, chunk: int
) -> np.ndarray:
    """:func:`flat_stretches` of a recording read about ``chunk`` samples at a time
    (``read(start, stop)``): the same stretches (parts start on block boundaries)."""
    block = _block(sampling_rate)
    part = max(block, math.ceil(chunk / block) * block)
    flags = [flat_blocks(read(a, min(n_samples, a + part)), sampling_rate) for a in range(0, n_samples, part)]
    return _stretches(np.concatenate(flags) if flags else np.zeros(0, bool), sampling_rate, n_samples)
