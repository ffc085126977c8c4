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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.spill import Spill, Stored
from devicepipe.core.units import check_peaks, hertz
from devicepipe.signal.blocks import neighbour_median

__all__ = ["HRV", "NN_RANGE_S", "MinuteRates", "hrv", "hrv_stored", "minute_rates", "nn_intervals"]

#: Plausible NN intervals in seconds (heart rates of 200 down to 30 bpm).
NN_RANGE_S = (0.3, 2.0)
#: An interval further than this share from the median of its neighbours is excluded as ectopic.
ECTOPIC_SHARE = 0.2
#: Neighbours on each side whose median an interval is compared with.
NEIGHBOURS = 5
#: Segment length for SDANN and the SDNN index, in seconds.
SEGMENT_S = 300.0
#: Intervals reduced at a time: the memory beyond the intervals themselves stays a few blocks.
BLOCK = 16_384


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
    rr, kept, implausible, ectopic = _intervals(peaks, sampling_rate, clean, "nn_intervals()")
    return rr * (1000.0 / float(sampling_rate)), kept, implausible, ectopic


def _intervals(
    peaks: torch.Tensor, sampling_rate: float, clean: bool, where: str = "hrv()"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`nn_intervals` in samples (whole numbers held exactly in float64); ``where``: the
    function its errors name."""
    check_peaks(peaks, where)
    hertz(sampling_rate, where)
    rr = torch.diff(peaks.to(torch.float64))
    none = torch.zeros_like(rr, dtype=torch.bool)
    if not clean:
        return rr, ~none, none, none
    lo, hi = (s * float(sampling_rate) for s in NN_RANGE_S)
    implausible = (rr < lo) | (rr > hi)
    ectopic = torch.zeros_like(implausible)
    for s, e in _blocks(rr.numel()):  # the neighbours of a block's intervals: NEIGHBOURS either side
        a, b = max(0, s - NEIGHBOURS), min(rr.numel(), e + NEIGHBOURS)
        near = rr[a:b].masked_fill(implausible[a:b], float("nan"))
        local = neighbour_median(near, NEIGHBOURS, exclude_self=True)[s - a : e - a]
        own = rr[s:e]
        ectopic[s:e] = ~implausible[s:e] & ((own - local).abs() > ECTOPIC_SHARE * local).nan_to_num(False)
    return rr, ~(implausible | ectopic), implausible, ectopic


def hrv(
    peaks: torch.Tensor | list[torch.Tensor],
    sampling_rate: float,
    *,
    clean: bool = True,
    segment_s: float = SEGMENT_S,
    normal: torch.Tensor | list[torch.Tensor] | None = None,
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
    normal : bool ``(n_peaks - 1,)`` per recording (as ``peaks``): the intervals between two
        normal beats (e.g. both of class N); the others are left out too, as the cleaning leaves
        its own out (and not counted among its implausible or ectopic intervals).
    """
    single = isinstance(peaks, torch.Tensor)
    rows: list[torch.Tensor] = [peaks] if isinstance(peaks, torch.Tensor) else list(peaks)
    if not rows:
        raise DevicepipeError("hrv(): no recordings given.")
    parts = [_intervals(r, sampling_rate, clean) for r in rows]
    if any(p[0].numel() < 2 for p in parts):
        raise DevicepipeError("hrv(): each recording needs at least three R peaks.")
    if normal is not None:
        masks: list[torch.Tensor] = [normal] if isinstance(normal, torch.Tensor) else list(normal)
        if len(masks) != len(parts) or any(m.shape != p[0].shape for m, p in zip(masks, parts, strict=False)):
            raise DevicepipeError("hrv(): normal must hold one bool per interval (n_peaks - 1) of each recording.")
        parts = [(rr, k & m.to(k.device, torch.bool), i, e) for (rr, k, i, e), m in zip(parts, masks, strict=True)]
    width = max(p[0].numel() for p in parts)

    def pad(t: torch.Tensor, value: float | bool) -> torch.Tensor:
        return F.pad(t[None], (0, width - t.numel()), value=value)[0]

    if single:  # (no padded copy of a long recording's intervals)
        rr, kept = parts[0][0][None], parts[0][1][None]
    else:
        rr = torch.stack([pad(p[0], 0.0) for p in parts])  # (recordings, width) samples
        kept = torch.stack([pad(p[1], False) for p in parts])
    implausible = torch.stack([p[2].sum() for p in parts])
    ectopic = torch.stack([p[3].sum() for p in parts])
    del parts  # (the masks: only their counts are needed)
    measures = _measures(_sliced(rr, kept), (rr.shape[0], rr.shape[1]), rr[:0], float(sampling_rate), segment_s)
    out = _hrv_of(measures, implausible, ectopic, float(sampling_rate))
    if single:
        return HRV(*(t[0] for t in out.__dict__.values()))
    return out


def hrv_stored(
    peaks: torch.Tensor | Stored,
    sampling_rate: float,
    *,
    clean: bool = True,
    segment_s: float = SEGMENT_S,
    normal: np.ndarray | None = None,
) -> HRV:
    """:func:`hrv` of one recording's R peaks (``(n_peaks,)``, increasing) read :data:`BLOCK`
    intervals at a time, as peaks held on disk (:class:`~devicepipe.core.spill.Stored`) are: the
    intervals and their cleaning wait on disk between the passes, so the memory held does not
    grow with the recording. The same values as :func:`hrv` of the peaks in memory (``normal``:
    ``(n_peaks - 1,)`` bool, as :func:`hrv` takes it)."""
    n = len(peaks)
    if n < 3:
        raise DevicepipeError("hrv(): each recording needs at least three R peaks.")
    width = n - 1
    if normal is not None and len(normal) != width:
        raise DevicepipeError("hrv(): normal must hold one bool per interval (n_peaks - 1) of the recording.")
    counts = torch.zeros(2, dtype=torch.int64)
    with Spill() as held:
        for s, e in _blocks(width):  # each block's intervals with their neighbours either side
            a, b = max(0, s - NEIGHBOURS), min(width, e + NEIGHBOURS)
            rr, kept, implausible, ectopic = _intervals(torch.as_tensor(peaks[a : b + 1]), sampling_rate, clean)
            own = slice(s - a, e - a)
            if normal is not None:
                kept = kept & torch.as_tensor(np.asarray(normal[a:b]), dtype=torch.bool, device=kept.device)
            held.append("rr", rr[own])
            held.append("kept", kept[own])
            counts += torch.stack([implausible[own].sum(), ectopic[own].sum()]).cpu()
        like = rr[:0]

        def block(s: int, e: int) -> tuple[torch.Tensor, torch.Tensor]:
            return held.read("rr", s, e, like.device)[None], held.read("kept", s, e, like.device)[None]

        measures = _measures(block, (1, width), like, float(sampling_rate), segment_s)
    out = _hrv_of(measures, counts[:1].to(like.device), counts[1:].to(like.device), float(sampling_rate))
    return HRV(*(t[0] for t in out.__dict__.values()))


def _sliced(rr: torch.Tensor, kept: torch.Tensor) -> Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]:
    return lambda s, e: (rr[:, s:e], kept[:, s:e])


def _hrv_of(measures: tuple[torch.Tensor, ...], implausible: torch.Tensor, ectopic: torch.Tensor, fs: float) -> HRV:
    """The :class:`HRV` of :func:`_measures`' answer (in samples) and the cleaning's counts."""
    mean, sdnn, rmssd, pnn50, n, sdann, sdnni = measures
    ms = 1000.0 / fs
    mean_ms = mean * ms
    return HRV(
        mean_ms, 60_000.0 / mean_ms, sdnn * ms, rmssd * ms, pnn50, sdann * ms, sdnni * ms, n, implausible, ectopic
    )


def _blocks(width: int) -> list[tuple[int, int]]:
    return [(s, min(width, s + BLOCK)) for s in range(0, width, BLOCK)]


def _measures(
    block: Callable[[int, int], tuple[torch.Tensor, torch.Tensor]],
    shape: tuple[int, int],
    like: torch.Tensor,
    sampling_rate: float,
    segment_s: float,
) -> tuple[torch.Tensor, ...]:
    """Mean NN, SDNN, RMSSD, pNN50, the kept count, SDANN and the SDNN index (in samples, pNN50
    in percent; ``(recordings,)`` each) of padded intervals (``shape``: ``(recordings, width)``,
    whole samples, float64 like ``like``) and their kept mask, read by ``block(s, e)`` (columns
    ``[s, e)`` of both) :data:`BLOCK` intervals at a time: the temporaries stay small however
    long the recording. Sums of whole samples in float64 are exact, so the mean and the
    segments' means do not depend on the blocks."""
    batch, width = shape
    rr = like
    segment_len = segment_s * sampling_rate
    zero = rr.new_zeros(batch)
    # pass 1: counts, sums, successive differences, each row's last kept interval's end
    n, total_rr, n_diff, sum_sq_diff, over_50 = zero.clone(), zero.clone(), zero.clone(), zero.clone(), zero.clone()
    last_end, carry = zero.clone(), zero.clone()
    for s, e in _blocks(width):
        lo = max(0, s - 1)  # one interval back: the difference across the blocks' seam
        r2, k2 = block(lo, e)
        r, k = r2[:, s - lo :], k2[:, s - lo :]
        ends = carry[:, None] + r.cumsum(1)  # samples from the first R peak to each interval's end
        carry = ends[:, -1]
        n += k.sum(1)
        total_rr += (r * k).sum(1)
        last_end = torch.maximum(last_end, (ends * k).amax(1))
        successive = k2[:, 1:] & k2[:, :-1]
        diffs = torch.diff(r2, dim=1)
        n_diff += successive.sum(1)
        sum_sq_diff += ((diffs**2) * successive).sum(1)
        # over 50 ms, compared in whole samples: a difference of exactly 50 ms is not counted
        over_50 += ((diffs.abs() > 0.05 * sampling_rate) & successive).sum(1)
    mean = total_rr / n
    rmssd = (sum_sq_diff / n_diff).sqrt()
    pnn50 = over_50 / n * 100.0
    # the segments: an interval belongs to the segment its end falls in
    n_segments = torch.round(last_end / segment_len).to(torch.int64).clamp(min=0)
    slots = int(n_segments.max()) + 1
    offset = slots * torch.arange(batch, device=rr.device)[:, None]
    count = rr.new_zeros(batch * slots)
    seg_total = torch.zeros_like(count)

    def segments(
        r: torch.Tensor, k: torch.Tensor, carry: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ends = carry[:, None] + r.cumsum(1)
        segment = torch.div(ends, segment_len, rounding_mode="floor").to(torch.int64)
        inside = k & (segment < n_segments[:, None])
        return (segment.clamp(0, slots - 1) + offset), inside, ends[:, -1]

    carry = zero.clone()
    for s, e in _blocks(width):
        r, k = block(s, e)
        index, inside, carry = segments(r, k, carry)
        r = r[inside]
        count.index_add_(0, index[inside], torch.ones_like(r))
        seg_total.index_add_(0, index[inside], r)
    seg_mean = seg_total / count
    # pass 2: deviations from the mean and from each segment's mean
    dev_sq, seg_dev_sq, carry = zero.clone(), torch.zeros_like(count), zero.clone()
    for s, e in _blocks(width):
        r, k = block(s, e)
        dev_sq += (((r - mean[:, None]) ** 2) * k).sum(1)
        index, inside, carry = segments(r, k, carry)
        seg_dev_sq.index_add_(0, index[inside], ((r - seg_mean[index]) ** 2)[inside])
    sdnn = (dev_sq / (n - 1)).sqrt()
    seg_mean, seg_sd = seg_mean.view(-1, slots), (seg_dev_sq / (count - 1)).sqrt().view(-1, slots)
    used = torch.arange(slots, device=rr.device)[None] < n_segments[:, None]
    m = used.sum(1).to(rr.dtype)
    centre = torch.where(used, seg_mean, 0.0).sum(1) / m
    sdann = (torch.where(used, (seg_mean - centre[:, None]) ** 2, 0.0).sum(1) / (m - 1)).sqrt()
    sdnni = torch.where(used, seg_sd, 0.0).sum(1) / m
    few = n_segments < 3
    nan = torch.full_like(sdann, float("nan"))
    return mean, sdnn, rmssd, pnn50, n.to(torch.int64), torch.where(few, nan, sdann), torch.where(few, nan, sdnni)


@dataclass(frozen=True)
class MinuteRates:
    """The heart rate of each minute that holds a beat: ``minute`` (0-based, from the recording's
    start), ``beats`` (RR intervals ending in it), ``median_bpm``, ``min_bpm``, ``max_bpm``; each
    of shape ``(minutes,)``. A beat's rate is 60 / the RR interval before it (uncleaned)."""

    minute: np.ndarray
    beats: np.ndarray
    median_bpm: np.ndarray
    min_bpm: np.ndarray
    max_bpm: np.ndarray


def minute_rates(peaks: np.ndarray, sampling_rate: float, *, minute_s: float = 60.0) -> MinuteRates:
    """Per-minute heart rate of R peaks ``peaks`` (sample indices, ``(n,)``, increasing) at
    ``sampling_rate`` Hz: each beat's rate from the interval before it, grouped by the minute the
    beat falls in (host arrays, as the heart-rate figure and ``heart_rate.csv`` show them)."""
    fs = float(sampling_rate)
    if peaks.size < 2:
        empty = np.zeros(0)
        return MinuteRates(empty.astype(np.int64), empty.astype(np.int64), empty, empty, empty)
    bpm = 60.0 * fs / np.diff(peaks.astype(np.float64))
    minute = np.floor(peaks[1:] / fs / minute_s).astype(np.int64)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(minute)) + 1])
    counts = np.diff(np.append(starts, minute.size))
    # each minute's rates in order (the minutes already are), for its middle one or two
    ordered = bpm[np.lexsort((bpm, minute))]
    median = (ordered[starts + (counts - 1) // 2] + ordered[starts + counts // 2]) / 2  # (np.median's)
    return MinuteRates(
        minute=minute[starts],
        beats=counts.astype(np.int64),
        median_bpm=median,
        min_bpm=np.minimum.reduceat(bpm, starts),
        max_bpm=np.maximum.reduceat(bpm, starts),
    )
