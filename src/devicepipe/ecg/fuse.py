"""``method="fuse"`` (``channel="all"``): one set of R peaks from every lead, each stretch
decided by the lead that shows the beats most clearly."""

from __future__ import annotations

import torch

from devicepipe.ecg.compiled import peaks_ricker_compiled
from devicepipe.ecg.quality import beat_correlation, beat_quality_of, stretch_medians, typical_beat
from devicepipe.ecg.ricker import Ricker, samples
from devicepipe.ecg.segment import ecg_segment
from devicepipe.signal.peaks import split_by_row

#: How long a stretch the lead showing the beats most clearly is chosen for, in seconds.
LEAD_STRETCH_S = 10.0


def peaks_ricker_fused(x: torch.Tensor, sampling_rate: float, **options: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One set of R peaks per recording from all its leads (``x`` of shape ``(batch, leads, time)``):
    rows (the recording) and columns, sorted.

    Each lead is detected on its own; then, stretch by stretch (:data:`LEAD_STRETCH_S`), the
    beats are those of the lead whose beats look most like that lead's typical beat (the median
    of :func:`beat_quality` over the stretch, :func:`stretch_medians`): a lead with motion
    artefacts, noise or a lost contact gives beats unlike its own typical beat, or none at all,
    and is passed over there, while a clean stretch of it counts. The same beat seen on several
    leads (peaks within half a refractory period) is one beat, placed where the chosen lead has it.
    """
    r = Ricker(float(sampling_rate), **options)
    batch, leads, n = x.shape
    flat = x.reshape(batch * leads, n)
    rows, cols = peaks_ricker_compiled(flat, sampling_rate, **options)  # (each lead compiled where short)
    medians = torch.stack(
        [
            lead_stretch_medians(flat[row], peaks, r.fs)
            for row, peaks in enumerate(split_by_row(rows, cols, batch * leads))
        ]
    ) if batch * leads else flat.new_zeros((0, lead_stretches(n, r.fs)))  # fmt: skip
    return fuse_leads(rows, cols, medians, batch, n, r.fs, refractory=r.refractory)


def lead_stretches(n_samples: int, sampling_rate: float) -> int:
    """How many :data:`LEAD_STRETCH_S` stretches a lead of ``n_samples`` samples has (the last shorter)."""
    return max(1, -(-int(n_samples) // samples(LEAD_STRETCH_S, float(sampling_rate))))


def lead_stretch_medians(signal: torch.Tensor, peaks: torch.Tensor, sampling_rate: float) -> torch.Tensor:
    """How clearly one lead ``signal`` ``(time,)`` shows its beats at ``peaks`` in each stretch:
    the median over the stretch of each beat's correlation with the lead's typical beat
    (:func:`beat_quality`), ``(stretches,)``, -inf where no beat was cut."""
    beats = ecg_segment(signal, peaks, float(sampling_rate), mode="centered")
    m = beats.matrix
    corr = beat_correlation(m, typical_beat(m)) if m.shape[0] else m.new_zeros(0)
    return stretch_medians_of_correlations(corr, beats.peaks, signal.shape[-1], sampling_rate)


def stretch_medians_of_correlations(
    corr: torch.Tensor, peaks: torch.Tensor, n_samples: int, sampling_rate: float
) -> torch.Tensor:
    """:func:`lead_stretch_medians` from the cut beats' correlations with the typical beat ``corr``
    ``(k,)`` and their R peaks ``(k,)`` (computed chunk by chunk, say)."""
    quality = beat_quality_of(corr, peaks, sampling_rate, window_s=LEAD_STRETCH_S)
    return stretch_medians(quality, peaks, n_samples, sampling_rate).nan_to_num(nan=-torch.inf)


def fuse_leads(
    rows: torch.Tensor,
    cols: torch.Tensor,
    medians: torch.Tensor,
    batch: int,
    n_samples: int,
    sampling_rate: float,
    *,
    refractory: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One set of R peaks per recording from each lead's: ``rows`` (recording * leads + lead) and
    ``cols`` of every lead's peaks (sorted by row, then column), ``medians`` ``(batch * leads,
    stretches)`` each lead's :func:`lead_stretch_medians`. Returns the recordings' rows and
    columns, sorted: in each stretch the beats of the lead with the highest median (a tie: the
    first), a beat seen on several leads (within half of ``refractory`` samples) taken once."""
    leads = medians.shape[0] // max(batch, 1)
    n = int(n_samples)
    window = samples(LEAD_STRETCH_S, float(sampling_rate))
    stretches = medians.shape[1]
    chosen = medians.reshape(batch, leads, stretches).argmax(1)  # (batch, stretches); a tie: the first lead
    recording, lead = rows // leads, rows % leads
    order = torch.argsort(recording * n + cols)
    recording, lead, cols = recording[order], lead[order], cols[order]
    # the same beat on several leads: peaks of one recording within half a refractory period
    new = torch.ones_like(cols, dtype=torch.bool)
    new[1:] = (recording[1:] != recording[:-1]) | (cols[1:] - cols[:-1] > refractory // 2)
    beat = torch.cumsum(new.to(torch.int64), 0) - 1
    first = cols[new][beat] if cols.numel() else cols
    wanted = chosen[recording, (first // window).clamp(max=stretches - 1)]
    taken = torch.nonzero(lead == wanted).squeeze(1)
    once = torch.ones_like(taken, dtype=torch.bool)
    once[1:] = beat[taken][1:] != beat[taken][:-1]  # one peak per beat (a lead's peaks are further apart)
    taken = taken[once]
    return recording[taken], cols[taken]
