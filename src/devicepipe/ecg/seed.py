"""``method="seed"``: the zero-copy ECG notebook's recipe, its sizes scaled to the recording's rate."""

from __future__ import annotations

import math

import torch

from devicepipe.ecg.ricker import SEED_RATE_HZ
from devicepipe.signal.filters import convolve
from devicepipe.signal.peaks import sliding_max


def seed_gates(x: torch.Tensor, sampling_rate: float = SEED_RATE_HZ) -> tuple[torch.Tensor, torch.Tensor]:
    """The notebook's gates: where a beat starts, and the curvature that found them.

    ``kernel = 2 * (exp(-t^2/2) (1 - t^2)) / sqrt(window)`` for ``t = linspace(-3, 3, window)``,
    embedded at the start of a zero kernel (so the convolution is causal and delays by half
    a kernel), and position ``p`` is a gate when ``curvature[p + (w + 1) // 2]`` is the maximum of
    ``curvature[p : p + w]``; runs of consecutive gates keep their first. ``window = 30`` and
    ``w = 180`` at 250 Hz, scaled to ``sampling_rate``.

    Returns
    -------
    gates : bool Tensor of shape ``(..., time)``.
    curvature : Tensor of shape ``(..., time)``.
    """
    scale = sampling_rate / SEED_RATE_HZ
    window = max(3, int(round(30 * scale)))
    nms = max(3, int(round(180 * scale)))
    t = torch.linspace(-3, 3, window, dtype=torch.float64)
    kernel = (2 * torch.exp(-0.5 * t**2) * (1 - t**2) / math.sqrt(window)).to(x.dtype)
    n = x.shape[-1]
    curvature = convolve(x, kernel, mode="full")[..., :n]  # causal, as the zero-embedded FFT kernel
    run_max = sliding_max(curvature, nms)  # (..., n - nms + 1)
    centre = curvature[..., (nms + 1) // 2 : (nms + 1) // 2 + run_max.shape[-1]]
    gate = centre == run_max
    first = torch.ones_like(gate)
    first[..., 1:] = ~gate[..., :-1]  # 0000011000 -> 0000010000
    gates = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    gates[..., : gate.shape[-1]] = gate & first
    return gates, curvature


def peaks_seed(x: torch.Tensor, sampling_rate: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The seed's gates moved to the curvature maxima they stand for, aligned to the signal.

    Returns the peaks' rows and columns, sorted.
    """
    gates, _ = seed_gates(x, sampling_rate)
    scale = sampling_rate / SEED_RATE_HZ
    window = max(3, int(round(30 * scale)))
    nms = max(3, int(round(180 * scale)))
    shift = (nms + 1) // 2 - (window - 1) // 2  # gate -> curvature peak -> undo the causal delay
    rows, cols = torch.nonzero(gates, as_tuple=True)
    cols = cols + shift
    keep = cols < x.shape[-1]
    return rows[keep], cols[keep]
