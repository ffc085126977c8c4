"""The baseline under each beat: the slow wander of an ECG's zero level, to take out of its beats.

Breathing and electrode movement shift an ECG's zero level by tenths of a millivolt over
seconds. A beat cut at the top of such a swing differs from one cut at its foot by an offset
and a slope that have nothing to do with the heart, and a score that compares beats' shapes
then flags the swing. The baseline is estimated as de Chazal, O'Dwyer and Reilly (IEEE Trans
Biomed Eng 51(7), 2004) do: a 200 ms median filter (which removes the QRS complexes and P
waves) and then a 600 ms one (the T waves); here on a copy averaged down to about
:data:`BASELINE_RATE` Hz, which the slow baseline does not need finer, so that a day-long
recording costs seconds.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from devicepipe.ecg.segment import Beats

#: The rate (Hz) of the averaged copy the baseline is estimated on.
BASELINE_RATE = 50.0
#: The two median filters' lengths in seconds: QRS complexes and P waves, then T waves.
BASELINE_WINDOWS_S = (0.2, 0.6)
#: What the baseline is, in words (a beat model's geometry records it).
BASELINE_WORDS = "each beat less the recording's baseline under it (median filters of 0.2 s and 0.6 s)"
#: Coarse samples filtered at once (bounds the memory of the sliding windows).
_BLOCK = 1 << 20


def ecg_baseline(signal: torch.Tensor, sampling_rate: float) -> tuple[torch.Tensor, int]:
    """The baseline of ``signal`` ``(time,)`` on its averaged copy: ``(coarse,)`` values, one per
    ``step`` samples (the second value returned), centred on the middle of each step."""
    step = max(1, round(sampling_rate / BASELINE_RATE))
    n = signal.shape[-1] // step * step
    coarse = signal[:n].reshape(-1, step).float().mean(1) if n else signal.float()[:1]
    for seconds in BASELINE_WINDOWS_S:
        coarse = _sliding_median(coarse, max(1, round(seconds * sampling_rate / step)) | 1)
    return coarse, step


def baseline_rows(signal: torch.Tensor, beats: Beats) -> torch.Tensor:
    """The baseline of ``signal`` ``(time,)`` under each row of ``beats``: ``(n_kept, width)``
    like ``beats.matrix``, zero where a row is zero padding. Linearly interpolated between the
    averaged copy's points."""
    n, width = beats.matrix.shape
    if n == 0:
        return torch.zeros_like(beats.matrix)
    coarse, step = ecg_baseline(signal, beats.sampling_rate)
    offsets = torch.arange(width, device=beats.matrix.device)
    at = (beats.starts[:, None] + offsets[None, :]).double()
    pos = ((at - (step - 1) / 2) / step).clamp(0, coarse.numel() - 1)  # on the coarse grid
    lo = pos.floor().long()
    hi = (lo + 1).clamp(max=coarse.numel() - 1)
    frac = (pos - lo).to(coarse.dtype)
    values = coarse[lo] * (1 - frac) + coarse[hi] * frac
    inside = offsets[None, :] < beats.lengths[:, None]
    return torch.where(inside, values, torch.zeros((), dtype=values.dtype, device=values.device)).to(beats.matrix.dtype)


def _sliding_median(x: torch.Tensor, window: int) -> torch.Tensor:
    """The median of each ``window`` (odd) values of ``x`` ``(n,)`` centred on it, the ends
    repeated outward: ``(n,)``."""
    if window <= 1 or x.numel() == 0:
        return x
    half = window // 2
    padded = F.pad(x[None, None, :], (half, half), mode="replicate")[0, 0]
    out = torch.empty_like(x)
    for start in range(0, x.numel(), _BLOCK):
        stop = min(start + _BLOCK, x.numel())
        out[start:stop] = padded[start : stop + 2 * half].unfold(0, window, 1).median(-1).values
    return out
