"""Heart rate and time-domain heart-rate variability from R peaks, on the peaks' device.

The measures are those of the 1996 Task Force of the ESC and NASPE, as NeuroKit2's
``hrv_time`` computes them from the same peaks: mean NN interval and heart rate, SDNN, RMSSD,
pNN50, and over 5-minute segments SDANN and the SDNN index. Before they are computed, NN
intervals can be cleaned (``clean=True``): an interval outside 0.3-2 s (a heart rate outside
30-200 bpm) is implausible, and one more than 20 % away from the median of its ten neighbours
follows or precedes an ectopic beat or a missed or false detection; both are excluded and
counted, and successive differences are taken only between two kept, adjacent intervals.

Many recordings are computed at once: :func:`hrv` takes one ``(peaks,)`` tensor or a list of
them and pads them into one ``(recordings, intervals)`` batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from devicepipe.errors import DevicepipeError
from devicepipe.signal.blocks import neighbour_median

__all__ = ["HRV", "NN_RANGE_S", "hrv", "nn_intervals"]

#: Plausible NN intervals in seconds (heart rates of 200 down to 30 bpm).
NN_RANGE_S = (0.3, 2.0)
#: An interval further than this share from the median of its neighbours is excluded as ectopic.
ECTOPIC_SHARE = 0.2
#: Neighbours on each side whose median an interval is compared with.
NEIGHBOURS = 5
#: Segment length for SDANN and the SDNN index, in seconds.
SEGMENT_S = 300.0


@dataclass(frozen=True)
class HRV:
    """Time-domain HRV of one or more recordings; every field is a tensor of shape ``(recordings,)``
    (a 0-d tensor for a single recording), on the peaks' device.

    ``mean_nn_ms``, ``sdnn_ms``, ``rmssd_ms``, ``sdann_ms``, ``sdnn_index_ms`` in milliseconds;
    ``mean_hr_bpm`` in beats per minute (60 000 / mean NN); ``pnn50_pct`` in percent of the NN
    intervals; ``n_intervals`` the intervals used; ``n_implausible`` and ``n_ectopic`` those
    excluded by cleaning. SDANN and the SDNN index are NaN under three 5-minute segments.
    """

    mean_nn_ms: torch.Tensor
    mean_hr_bpm: torch.Tensor
    sdnn_ms: torch.Tensor
    rmssd_ms: torch.Tensor
    pnn50_pct: torch.Tensor
    sdann_ms: torch.Tensor
    sdnn_index_ms: torch.Tensor
    n_intervals: torch.Tensor
    n_implausible: torch.Tensor
    n_ectopic: torch.Tensor

    def to_dict(self) -> dict[str, Any]:
        """Host numbers (a float or int each, or lists of them for several recordings) for JSON."""
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            values = value.detach().cpu().tolist()
            out[name] = values
        return out


def nn_intervals(
    peaks: torch.Tensor, sampling_rate: float, *, clean: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """NN intervals of one recording's R peaks and which of them are kept.

    Parameters
    ----------
    peaks : int Tensor of shape ``(n_peaks,)``, sample indices in increasing order.
    sampling_rate : Hz.
    clean : exclude implausible intervals (outside :data:`NN_RANGE_S`) and those more than 20 %
        away from the median of their :data:`NEIGHBOURS` neighbours on each side.

    Returns
    -------
    ``(intervals_ms, kept, implausible, ectopic)``: float64 intervals of shape ``(n_peaks - 1,)``
    and three bool masks of that shape.
    """
    rr, kept, implausible, ectopic = _intervals(peaks, sampling_rate, clean)
    return rr * (1000.0 / float(sampling_rate)), kept, implausible, ectopic


def _intervals(
    peaks: torch.Tensor, sampling_rate: float, clean: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`nn_intervals` in samples (whole numbers held exactly in float64)."""
    if peaks.ndim != 1:
        raise DevicepipeError(f"hrv(): peaks must have shape (n_peaks,), got {tuple(peaks.shape)}.")
    if not sampling_rate or not sampling_rate > 0:
        raise DevicepipeError(f"hrv(): sampling_rate must be a positive number of Hz, got {sampling_rate}.")
    rr = torch.diff(peaks.to(torch.float64))
    if (rr <= 0).any():
        raise DevicepipeError("hrv(): peaks must be strictly increasing sample indices; sort them first.")
    none = torch.zeros_like(rr, dtype=torch.bool)
    if not clean:
        return rr, ~none, none, none
    lo, hi = (s * float(sampling_rate) for s in NN_RANGE_S)
    implausible = (rr < lo) | (rr > hi)
    local = neighbour_median(rr.masked_fill(implausible, float("nan")), NEIGHBOURS, exclude_self=True)
    ectopic = ~implausible & ((rr - local).abs() > ECTOPIC_SHARE * local).nan_to_num(False)
    return rr, ~(implausible | ectopic), implausible, ectopic


def hrv(
    peaks: torch.Tensor | list[torch.Tensor],
    sampling_rate: float,
    *,
    clean: bool = True,
    segment_s: float = SEGMENT_S,
) -> HRV:
    """Heart rate and time-domain HRV of the R peaks of one recording or of several.

    Parameters
    ----------
    peaks : int Tensor of shape ``(n_peaks,)``, or a list of them (one per recording, any
        lengths), sample indices in increasing order.
    sampling_rate : Hz (the same for every recording).
    clean : see :func:`nn_intervals`.
    segment_s : segment length of SDANN and the SDNN index. Segments run from the first R peak;
        an interval belongs to the segment its end falls in; a last, shorter segment counts
        when it is at least half as long.
    """
    single = isinstance(peaks, torch.Tensor)
    rows = [peaks] if single else list(peaks)
    if not rows:
        raise DevicepipeError("hrv(): no recordings given.")
    parts = [_intervals(r, sampling_rate, clean) for r in rows]
    if any(p[0].numel() < 2 for p in parts):
        raise DevicepipeError("hrv(): each recording needs at least three R peaks.")
    width = max(p[0].numel() for p in parts)

    def pad(t: torch.Tensor, value: float | bool) -> torch.Tensor:
        return F.pad(t[None], (0, width - t.numel()), value=value)[0]

    ms = 1000.0 / float(sampling_rate)
    rr = torch.stack([pad(p[0], 0.0) for p in parts])  # (recordings, width) samples
    kept = torch.stack([pad(p[1], False) for p in parts])
    implausible = torch.stack([pad(p[2], False) for p in parts]).sum(1)
    ectopic = torch.stack([pad(p[3], False) for p in parts]).sum(1)
    ends = rr.cumsum(1)  # samples from the first R peak to each interval's end (padding beyond the end)
    n = kept.sum(1)
    nf = n.to(rr.dtype)
    mean = (rr * kept).sum(1) / nf
    sdnn = (((rr - mean[:, None]) ** 2) * kept).sum(1).div(nf - 1).sqrt()
    successive = kept[:, 1:] & kept[:, :-1]
    diffs = torch.diff(rr, dim=1)
    n_diff = successive.sum(1).to(rr.dtype)
    rmssd = ((diffs**2) * successive).sum(1).div(n_diff).sqrt()
    # over 50 ms, compared in whole samples: a difference of exactly 50 ms is not counted
    pnn50 = ((diffs.abs() > 0.05 * float(sampling_rate)) & successive).sum(1).to(rr.dtype) / nf * 100.0
    sdann, sdnni = _segment_measures(rr, kept, ends, segment_s * float(sampling_rate))
    mean_ms = mean * ms
    out = HRV(
        mean_ms, 60_000.0 / mean_ms, sdnn * ms, rmssd * ms, pnn50, sdann * ms, sdnni * ms, n, implausible, ectopic
    )
    if single:
        return HRV(*(t[0] for t in out.__dict__.values()))
    return out


def _segment_measures(
    rr: torch.Tensor, kept: torch.Tensor, ends: torch.Tensor, segment_len: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """SDANN and the SDNN index over segments of ``segment_len`` samples (``rr`` and ``ends`` in samples
    too); NaN under three segments."""
    total = (ends * kept).amax(1)  # the last kept interval's end
    n_segments = torch.round(total / segment_len).to(torch.int64).clamp(min=0)
    slots = int(n_segments.max()) + 1
    segment = torch.div(ends, segment_len, rounding_mode="floor").to(torch.int64)  # where each interval ends
    inside = kept & (segment < n_segments[:, None])
    index = segment.clamp(0, slots - 1) + slots * torch.arange(rr.shape[0], device=rr.device)[:, None]
    flat = index[inside]
    count = torch.zeros(rr.shape[0] * slots, dtype=rr.dtype, device=rr.device).index_add_(
        0, flat, torch.ones_like(rr[inside])
    )
    total_rr = torch.zeros_like(count).index_add_(0, flat, rr[inside])
    seg_mean = total_rr / count
    dev = (rr - seg_mean[index]) ** 2
    seg_var = torch.zeros_like(count).index_add_(0, flat, dev[inside]) / (count - 1)
    seg_mean, seg_sd = seg_mean.view(-1, slots), seg_var.sqrt().view(-1, slots)
    used = torch.arange(slots, device=rr.device)[None] < n_segments[:, None]
    m = used.sum(1).to(rr.dtype)
    centre = torch.where(used, seg_mean, 0.0).sum(1) / m
    sdann = (torch.where(used, (seg_mean - centre[:, None]) ** 2, 0.0).sum(1) / (m - 1)).sqrt()
    sdnni = torch.where(used, seg_sd, 0.0).sum(1) / m
    few = n_segments < 3
    nan = torch.full_like(sdann, float("nan"))
    return torch.where(few, nan, sdann), torch.where(few, nan, sdnni)
