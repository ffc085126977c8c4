"""``method="fuse"`` (``channel="all"``): one set of R peaks from every lead, each stretch
decided by the lead that shows the beats most clearly."""

from __future__ import annotations

import torch

from devicepipe.ecg.quality import beat_quality, stretch_medians
from devicepipe.ecg.ricker import _peaks_ricker, _Ricker, _samples
from devicepipe.ecg.segment import ecg_segment
from devicepipe.signal.peaks import split_by_row

#: How long a stretch the lead showing the beats most clearly is chosen for, in seconds.
LEAD_STRETCH_S = 10.0


def _peaks_ricker_fused(x: torch.Tensor, sampling_rate: float, **options: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One set of R peaks per recording from all its leads (``x`` of shape ``(batch, leads, time)``):
    rows (the recording) and columns, sorted.

    Each lead is detected on its own; then, stretch by stretch (:data:`LEAD_STRETCH_S`), the
    beats are those of the lead whose beats look most like that lead's typical beat (the median
    of :func:`beat_quality` over the stretch, :func:`stretch_medians`): a lead with motion
    artefacts, noise or a lost contact gives beats unlike its own typical beat, or none at all,
    and is passed over there, while a clean stretch of it counts. The same beat seen on several
    leads (peaks within half a refractory period) is one beat, placed where the chosen lead has it.
    """
    r = _Ricker(float(sampling_rate), **options)
    batch, leads, n = x.shape
    flat = x.reshape(batch * leads, n)
    rows, cols = _peaks_ricker(flat, sampling_rate, **options)
    window = _samples(LEAD_STRETCH_S, r.fs)
    stretches = -(-n // window)
    medians = torch.full((batch * leads, stretches), -torch.inf, dtype=x.dtype, device=x.device)
    for row, peaks in enumerate(split_by_row(rows, cols, batch * leads)):
        beats = ecg_segment(flat[row], peaks, r.fs, mode="centered")
        quality = beat_quality(beats, window_s=LEAD_STRETCH_S)
        medians[row] = stretch_medians(quality, beats.peaks, n, r.fs).nan_to_num(nan=-torch.inf)
    chosen = medians.reshape(batch, leads, stretches).argmax(1)  # (batch, stretches); a tie: the first lead
    recording, lead = rows // leads, rows % leads
    order = torch.argsort(recording * n + cols)
    recording, lead, cols = recording[order], lead[order], cols[order]
    # the same beat on several leads: peaks of one recording within half a refractory period
    new = torch.ones_like(cols, dtype=torch.bool)
    new[1:] = (recording[1:] != recording[:-1]) | (cols[1:] - cols[:-1] > r.refractory // 2)
    beat = torch.cumsum(new.to(torch.int64), 0) - 1
    first = cols[new][beat] if cols.numel() else cols
    wanted = chosen[recording, (first // window).clamp(max=stretches - 1)]
    taken = torch.nonzero(lead == wanted).squeeze(1)
    once = torch.ones_like(taken, dtype=torch.bool)
    once[1:] = beat[taken][1:] != beat[taken][:-1]  # one peak per beat (a lead's peaks are further apart)
    taken = taken[once]
    return recording[taken], cols[taken]
