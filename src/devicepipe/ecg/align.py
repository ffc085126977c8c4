"""Beats lined up with the typical one: detection jitter taken out before they are compared.

An R peak found on a sampled signal is off its true top by up to half a sample, and noise
moves it a whole sample now and then (4 ms at 250 Hz). Beats cut around such a peak have
their QRS complex a little early or late, and a score that compares beats point by point
finds those few beats unlike the rest, on a recording with nothing unusual. Each beat (a row
resampled to the model's width) is moved, at most :data:`MAX_SHIFT_S` either way, by the
shift that brings its QRS complex closest (least squares) to the typical beat's: the best whole
column first, then the fraction of a column where a parabola through the errors one column
either side of it is least. A fraction of a column is a band-limited move (a phase ramp of the
row's spectrum, its ends held by a straight line), which keeps a sharp QRS sharp where
interpolating between columns would blunt it by how far it moved.
"""

from __future__ import annotations

import math

import torch

#: The most a beat is moved to line it up, in seconds: a sample or two of jitter at 250 Hz.
MAX_SHIFT_S = 0.008
#: The span around the R peak compared, in seconds either side: the QRS complex.
QRS_HALF_S = 0.06
#: What lining up is, in words (a beat model's geometry records it).
ALIGNED_WORDS = (
    f"each beat moved by at most {1000 * MAX_SHIFT_S:g} ms, to a fraction of a column, to line its QRS "
    "complex up with the typical beat's"
)


def align_rows(
    rows: torch.Tensor, r_column: float, columns_per_s: float, *, fractional: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` ``(n, width)`` (beats resampled, their R peak at column ``r_column``, with
    ``columns_per_s`` columns a second) each moved to line up with their median row over the
    QRS complex, the ends repeated into the gap; and each row's shift in columns ``(n,)``, a
    float (positive: its QRS came late, and moved earlier).

    The shift is the whole number of columns (at most ``MAX_SHIFT_S`` seconds) with the least
    squared difference from the median row, then refined, against the median of the rows so
    moved, to the vertex of the parabola through the differences at that shift and one column
    either side (within half a column of it, and within the limit). ``fractional=False``: the
    whole columns alone (each row's values then only move)."""
    n, width = rows.shape
    most = max(0, math.floor(MAX_SHIFT_S * columns_per_s))
    none = torch.zeros(n, dtype=rows.dtype, device=rows.device)
    if n < 2 or most == 0:
        return rows, none
    half = max(1, round(QRS_HALF_S * columns_per_s))
    lo, hi = max(most + 1, round(r_column) - half), min(width - most - 1, round(r_column) + half + 1)
    if hi <= lo:
        return rows, none
    template = rows.median(0).values[lo:hi]
    order = sorted(range(-most, most + 1), key=abs)  # 0, -1, 1, ...: a tie goes to the least move
    errors = torch.stack([((rows[:, lo + s : hi + s] - template) ** 2).sum(1) for s in order], 1)
    best = torch.tensor(order, device=rows.device, dtype=rows.dtype)[errors.argmin(1)]
    if not fractional:
        columns = (torch.arange(width, device=rows.device)[None, :] + best[:, None].long()).clamp(0, width - 1)
        return rows.gather(1, columns), best
    template = shift_rows(rows, best).median(0).values[lo:hi]
    around = [((shift_rows(rows, best + s)[:, lo:hi] - template) ** 2).sum(1) for s in (-1, 0, 1)]
    early, here, late = around
    curve = early - 2 * here + late
    step = torch.where(curve > 0, 0.5 * (early - late) / curve.clamp_min(torch.finfo(rows.dtype).tiny), 0.0)
    shift = (best + step.clamp(-0.5, 0.5)).clamp(-most, most)
    return shift_rows(rows, shift), shift


def shift_rows(rows: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Each row of ``rows`` ``(n, width)`` moved earlier by ``shift`` ``(n,)`` columns (a float:
    column ``j`` of the result is the row at ``j + shift``), band-limited: the row less the
    straight line through its ends, zero-padded to twice its width, moved by a phase ramp of its
    spectrum, and the line added back at the moved positions (held at the ends past them)."""
    n, width = rows.shape
    if width < 2:
        return rows
    t = torch.arange(width, dtype=rows.dtype, device=rows.device)
    first, last = rows[:, :1], rows[:, -1:]
    slope = (last - first) / (width - 1)
    spectrum = torch.fft.rfft(rows - first - slope * t, n=2 * width, dim=1)
    freq = torch.fft.rfftfreq(2 * width, dtype=rows.dtype, device=rows.device)
    ramp = torch.polar(torch.ones_like(spectrum.real), 2 * math.pi * freq * shift[:, None].to(rows.dtype))
    moved = torch.fft.irfft(spectrum * ramp, n=2 * width, dim=1)[:, :width]
    return moved + first + slope * (t + shift[:, None]).clamp(0, width - 1)
