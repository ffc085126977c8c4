"""Spikes taken out of a recording: where a narrow spike (a pacemaker's stimulus, a glitch) stood
over a beat in the detector's filter and took its place as the candidate, its samples are set to
the sample before them and the recording detected again (:func:`devicepipe.ecg.ricker.peaks_ricker`,
its chunked and compiled forms)."""

from __future__ import annotations

import torch

__all__ = ["SPIKE_PASSES", "without_spikes"]

#: Detection passes at most on a recording with spikes (a pacemaker's stimuli, glitches): a spike
#: taller in the filter than the QRS after it was taken for the candidate there and, being no
#: beat, left none (a paced ECG whose stimuli stood over its QRS lost every beat). Where a spike
#: stands over the lowest threshold a beat passes (``Ricker.hides_beats``), a pass takes out every
#: spike it found and detects again; a recording whose spikes are all lower (blips of noise) is
#: detected once, as before.
SPIKE_PASSES = 3


def without_spikes(
    x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, sign: torch.Tensor, spike: int, offset: int = 0
) -> torch.Tensor:
    """A copy of rows ``x`` (``(batch, n)``: samples ``offset ...`` of a recording) with each spike
    taken out: the samples next to its extremum (``rows``, ``cols``: absolute columns, ``sign``: its
    polarity) that stand at or above half its height within ``spike`` samples, as
    :meth:`~devicepipe.ecg.ricker.Ricker.candidates` measures them, each set to the sample just
    before them. A spike whose window reaches past either end of ``x`` is left (where ``x`` is a
    part of a recording read with margins, its own part takes it out). Copies of samples, no
    arithmetic: the same values on any device and compiled."""
    at = cols - offset
    n = x.shape[-1]
    inside = (at - spike - 1 >= 0) & (at + spike < n)
    rows, at, sign = rows[inside], at[inside], sign[inside]
    out = x.clone()
    if not rows.numel():
        return out
    idx = at[:, None] + torch.arange(-spike, spike + 1, device=x.device)
    v = x[rows[:, None], idx] * sign[:, None]
    half = (v[:, spike : spike + 1] + v.amin(1, keepdim=True)) / 2
    high = (v >= half).to(torch.int64)  # (cumprod of bool is not on every device)
    left = high[:, :spike].flip(1).cumprod(1).sum(1)
    right = high[:, spike + 1 :].cumprod(1).sum(1)
    width = left + right + 1
    first = at - left
    value = x[rows, first - 1]
    reps = torch.repeat_interleave(torch.arange(rows.numel(), device=x.device), width)
    step = torch.arange(int(width.sum()), device=x.device) - torch.repeat_interleave(
        torch.cumsum(width, 0) - width, width
    )
    out[rows[reps], first[reps] + step] = value[reps]
    return out
