"""Beats lined up with the typical one: a sample of detection jitter taken out before they are compared.

An R peak found on a sampled signal is off its true top by up to half a sample, and noise
moves it a whole sample now and then (4 ms at 250 Hz). Beats cut around such a peak have
their QRS complex a little early or late, and a score that compares beats point by point
finds those few beats unlike the rest, on a recording with nothing unusual. Each beat (a row
resampled to the model's width, so finer than the recording's samples) is moved by the whole
columns, at most :data:`MAX_SHIFT_S` either way, that bring its QRS complex closest (least
squares) to the typical beat's.
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
    f"each beat moved by at most {1000 * MAX_SHIFT_S:g} ms to line its QRS complex up with the typical beat's"
)


def align_rows(rows: torch.Tensor, r_column: float, columns_per_s: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` ``(n, width)`` (beats resampled, their R peak at column ``r_column``, with
    ``columns_per_s`` columns a second) each moved by whole columns to line up with their median
    row over the QRS complex, the ends repeated into the gap; and each row's shift in columns
    ``(n,)`` (positive: its QRS came late, and moved earlier)."""
    n, width = rows.shape
    most = max(0, math.floor(MAX_SHIFT_S * columns_per_s))
    if n < 2 or most == 0:
        return rows, torch.zeros(n, dtype=torch.long, device=rows.device)
    half = max(1, round(QRS_HALF_S * columns_per_s))
    lo, hi = max(most, round(r_column) - half), min(width - most, round(r_column) + half + 1)
    if hi <= lo:
        return rows, torch.zeros(n, dtype=torch.long, device=rows.device)
    template = rows.median(0).values[lo:hi]
    order = sorted(range(-most, most + 1), key=abs)  # 0, -1, 1, ...: a tie goes to the least move
    errors = torch.stack([((rows[:, lo + s : hi + s] - template) ** 2).sum(1) for s in order], 1)
    best = torch.tensor(order, device=rows.device)[errors.argmin(1)]
    columns = (torch.arange(width, device=rows.device)[None, :] + best[:, None]).clamp(0, width - 1)
    return rows.gather(1, columns), best
