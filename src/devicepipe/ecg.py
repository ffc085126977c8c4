"""ECG heartbeats: find R peaks, cut beats into a matrix, score detections against a reference.

One verb per step, as in NeuroKit2: :func:`ecg_peaks` (``method=`` dispatches through
``ECG_PEAK_METHODS``), :func:`ecg_segment`, :func:`evaluate_beats`. Everything runs on the
input's device; every width is given in seconds and scaled by the sampling rate.

The default method, ``"ricker"``:

1. a Ricker wavelet of width ``sigma_s`` (a band-pass centred near ``sqrt(2) / (2 pi sigma_s)``,
   about 15 Hz: QRS energy passes, baseline wander and most of the P and T waves do not), made
   exactly zero-sum so that no offset in the signal reaches the response;
2. its magnitude, so either polarity of QRS works;
3. candidates: the largest value within a refractory period either side;
4. an adaptive threshold, from the filtered signal's envelope in half-second blocks: a
   fraction of the weakest 2-second maximum over ``level_s`` seconds (so one artefact does
   not raise it), never below a fraction of the recording's typical QRS level nor a multiple
   of the local noise floor (so flat and noise-only stretches give no beats);
5. Pan and Tompkins' T-wave rule: a candidate within 0.36 s of the previous one, at under
   half the smaller of its height and the local beat level, is dropped;
6. polarity consistency: the QRS complexes of one lead share the polarity the filter sees,
   motion artefacts come with either sign, so a candidate of the other polarity must stand
   ``polarity_ratio`` (1.5) times above the recording's typical beat level, the median of the
   candidates' local levels (a tall ectopic beat does);
7. each surviving candidate refined to the extremum of the signal itself, with the polarity
   the filter saw.

``"seed"`` is the recipe of the zero-copy ECG notebook, kept as it was (30-tap Ricker over
``[-3, 3]``, causal convolution, window-180 non-maximum suppression at 250 Hz, no threshold),
with its sizes scaled from 250 Hz to the recording's rate.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from devicepipe.errors import DevicepipeError
from devicepipe.signal.blocks import block_reduce, centred_window, row_median
from devicepipe.signal.filters import centred_convolve, centred_convolve_at, convolve
from devicepipe.signal.peaks import peak_mask, sliding_max, split_by_row
from devicepipe.signal.resample import resample_rows
from devicepipe.signal.segment import segment, segment_between
from devicepipe.signal.wavelets import ricker

__all__ = [
    "ECG_PEAK_METHODS",
    "EDGE_S",
    "MATCH_TOLERANCE_S",
    "SEGMENT_MODES",
    "BeatScore",
    "Beats",
    "ecg_peaks",
    "ecg_segment",
    "evaluate_beats",
    "label_beats",
    "seed_gates",
]

#: A detected beat matches a reference beat within this many seconds (ANSI/AAMI EC57's 150 ms).
MATCH_TOLERANCE_S = 0.15
#: Beats this close (s) to either end of a recording are not scored against a reference.
EDGE_S = 0.5

SEED_RATE_HZ = 250.0  # the notebook's recording (UCR "ECG one day") is sampled at 250 Hz


def _check_input(x: torch.Tensor, sampling_rate: float, where: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise DevicepipeError(f"{where}: expected a torch.Tensor, got {type(x).__name__}.")
    if x.ndim not in (1, 2):
        raise DevicepipeError(f"{where}: expected shape (time,) or (batch, time), got {tuple(x.shape)}.")
    x = x.detach() if x.dtype.is_floating_point else x.detach().to(torch.float32)  # no autograd; integers as float
    if not sampling_rate or not sampling_rate > 0 or not math.isfinite(sampling_rate):
        raise DevicepipeError(f"{where}: sampling_rate must be a finite, positive number of Hz, got {sampling_rate}.")
    if x.is_floating_point() and not bool(torch.isfinite(x.sum())) and not bool(torch.isfinite(x).all()):
        # one NaN or inf would spread through the filter and erase every beat: refuse, never answer wrongly
        bad = ~torch.isfinite(x)
        first = int(torch.nonzero(bad.reshape(-1) if x.ndim == 1 else bad.any(0))[0])
        raise DevicepipeError(
            f"{where}: x holds {int(bad.sum()):,} non-finite value(s) (NaN or inf), the first at sample {first:,}; "
            "drop or interpolate them first (read_series(..., nan='interpolate')).",
            cli=f"the recording holds {int(bad.sum()):,} non-finite value(s) (NaN or inf), the first at sample "
            f"{first:,}; pass --nan drop or --nan interpolate.",
        )
    if x.shape[-1] < 2 * sampling_rate:
        raise DevicepipeError(
            f"{where}: the recording has {x.shape[-1]} samples, under 2 s at {sampling_rate:g} Hz; "
            "beat detection needs at least two seconds."
        )
    return x


def _samples(seconds: float, sampling_rate: float, minimum: int = 1) -> int:
    return max(minimum, int(round(seconds * sampling_rate)))


# ----------------------------------------------------------------------------- default method


def _peaks_ricker(
    x: torch.Tensor,
    sampling_rate: float,
    *,
    sigma_s: float = 0.015,
    refractory_s: float = 0.2,
    block_s: float = 0.5,
    envelope_s: float = 2.0,
    level_s: float = 6.0,
    threshold: float = 0.4,
    global_floor: float = 0.1,
    noise_factor: float = 3.0,
    refine_s: float = 0.05,
    close_s: float = 0.36,
    close_ratio: float = 0.5,
    min_contrast: float = 7.0,
    polarity_ratio: float = 1.5,
) -> torch.Tensor:
    """R peaks of each row of ``x`` (shape ``(batch, time)``) as a bool mask of the same shape."""
    fs = float(sampling_rate)
    width = sigma_s * fs
    kernel = ricker(2 * math.ceil(4 * width) + 1, width, dtype=torch.float64)
    kernel = (kernel - kernel.mean()).to(device=x.device, dtype=x.dtype)  # zero-sum: blind to any offset
    mean = x.mean(-1, keepdim=True)
    feature = centred_convolve(x, mean, kernel).abs_()  # |Ricker response of x - mean|, one buffer
    options = dict(
        refractory_s=refractory_s,
        block_s=block_s,
        envelope_s=envelope_s,
        level_s=level_s,
        threshold=threshold,
        global_floor=global_floor,
        noise_factor=noise_factor,
        min_contrast=min_contrast,
    )
    rows, cols, level = _threshold_peaks(feature, fs, **options)
    if close_ratio > 0:
        rows, cols, level = _drop_weak_followers(feature, rows, cols, level, _samples(close_s, fs), close_ratio)
    sign = torch.sign(centred_convolve_at(x, mean, kernel, rows, cols))
    if polarity_ratio > 0 and cols.numel():
        # each row's dominant polarity is the majority sign of its candidates' filtered response
        dominant = torch.sign(torch.zeros(x.shape[0], device=x.device, dtype=x.dtype).index_add_(0, rows, sign))
        typical = row_median(level, rows, x.shape[0])  # the recording's usual beat level
        keep = (sign == dominant[rows]) | (feature[rows, cols] >= polarity_ratio * typical[rows])
        rows, cols, sign = rows[keep], cols[keep], sign[keep]
    return _refine(x, sign, rows, cols, _samples(refine_s, fs))


def _drop_weak_followers(
    feature: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, level: torch.Tensor, reach: int, ratio: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Drop a candidate that follows another within ``reach`` samples at under ``ratio`` of the
    smaller of that one's height and the local beat ``level`` (so a normal beat after a tall
    ectopic one stays).

    The T-wave rule of Pan and Tompkins (IEEE TBME 32(3), 1985): a weak deflection shortly
    after a beat is more likely its T wave, or noise, than a new beat.
    """
    if cols.numel() < 2:
        return rows, cols, level
    close = (rows[1:] == rows[:-1]) & (cols[1:] - cols[:-1] <= reach)
    height = feature[rows, cols]
    weak = close & (height[1:] < ratio * torch.minimum(height[:-1], level[1:]))
    keep = torch.ones_like(cols, dtype=torch.bool)
    keep[1:] = ~weak
    return rows[keep], cols[keep], level[keep]


def _threshold_peaks(
    feature: torch.Tensor,
    fs: float,
    *,
    refractory_s: float,
    block_s: float,
    envelope_s: float,
    level_s: float,
    threshold: float,
    global_floor: float,
    noise_factor: float,
    min_contrast: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Candidates of a non-negative ``(batch, time)`` feature above its adaptive threshold.

    Returns the candidates' rows and columns (sorted) and the local beat level at each.
    """
    # envelope in blocks: the strongest response within +-envelope_s/2, the weakest of those over level_s
    block = _samples(block_s, fs)
    block_max = block_reduce(feature, block, "max")
    envelope = centred_window(block_max, _samples(envelope_s / block_s, 1.0), "max")
    level = centred_window(envelope, _samples(level_s / block_s, 1.0), "min")
    # noise floor: the mean response over the envelope window
    noise = centred_window(block_reduce(feature, block, "mean"), _samples(envelope_s / block_s, 1.0), "mean")
    typical = envelope.median(-1, keepdim=True).values
    per_block = torch.maximum(threshold * level, global_floor * typical)
    per_block = torch.maximum(per_block, noise_factor * noise)
    per_block = torch.clamp(per_block, min=float(torch.finfo(feature.dtype).tiny))
    # a row whose typical QRS response does not stand well above its median response holds no ECG:
    # white noise gives a contrast near 4.6 at any rate, real recordings 17 to 110
    stride = max(1, feature.shape[-1] // 200_000)  # the median of a subsample is enough
    contrast = typical.squeeze(-1) / feature[..., ::stride].median(-1).values.clamp(min=torch.finfo(feature.dtype).tiny)
    per_block[contrast < min_contrast] = torch.inf
    rows, cols = _coarse_peaks(feature, _samples(refractory_s, fs, 2), _samples(0.016, fs))
    blocks = cols // block
    keep = feature[rows, cols] > per_block[rows, blocks]
    rows, cols, blocks = rows[keep], cols[keep], blocks[keep]
    return rows, cols, level[rows, blocks]


def _coarse_peaks(feature: torch.Tensor, min_distance: int, sub: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-maximum suppression on maxima of ``sub``-sample blocks, then the argmax inside each winner.

    The same candidates as ``peak_mask(feature, min_distance=...)`` up to a refractory period
    coarsened by under ``sub`` samples, at a ``sub``-th of the cost of the sliding maximum.
    """
    if sub <= 1:
        return torch.nonzero(peak_mask(feature, min_distance=min_distance), as_tuple=True)
    n = feature.shape[-1]
    maxima = block_reduce(feature, sub, "max")
    rows, blocks = torch.nonzero(peak_mask(maxima, min_distance=max(2, -(-min_distance // sub))), as_tuple=True)
    # the first maximum inside each winning block (a clamped index repeats the last sample: no earlier tie)
    idx = (blocks[:, None] * sub + torch.arange(sub, device=feature.device)).clamp(max=n - 1)
    inside = feature[rows[:, None], idx].argmax(-1)
    return rows, blocks * sub + inside


def _refine(
    x: torch.Tensor, polarity: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, reach: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Move each candidate to the extremum of ``x`` within ``reach`` samples, in the filter's
    ``polarity`` (+1 or -1 per candidate).

    Returns the refined peaks' rows and columns, sorted, without repeats.
    """
    if rows.numel() == 0:
        return rows, cols
    n = x.shape[-1]
    idx = (cols[:, None] + torch.arange(-reach, reach + 1, device=x.device)).clamp(0, n - 1)
    window = x[rows[:, None], idx]
    centred = (window - window.mean(-1, keepdim=True)) * polarity[:, None]
    refined = idx.gather(1, centred.argmax(-1, keepdim=True)).squeeze(1)
    key = torch.unique(rows * n + refined)  # two candidates may settle on one sample
    return key // n, key % n


# ----------------------------------------------------------------------------- the seed's method


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


def _peaks_seed(x: torch.Tensor, sampling_rate: float) -> tuple[torch.Tensor, torch.Tensor]:
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


# each method maps (batch, time) and a rate to the (rows, columns) of its peaks, sorted
ECG_PEAK_METHODS: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {
    "ricker": _peaks_ricker,
    "seed": _peaks_seed,
}


def ecg_peaks(
    x: torch.Tensor, sampling_rate: float, *, method: str = "ricker", **options: Any
) -> torch.Tensor | list[torch.Tensor]:
    """Find the R peaks of an ECG.

    Parameters
    ----------
    x : Tensor of shape ``(time,)``, or ``(batch, time)`` for many equal-length recordings
        processed in one pass; any device.
    sampling_rate : Hz (125 to 1000 Hz tested).
    method : a key of ``ECG_PEAK_METHODS``: ``"ricker"`` (default) or ``"seed"``.
    options : keyword settings of the method (for ``"ricker"``: ``sigma_s``, ``refractory_s``,
        ``threshold``, ... in seconds or as fractions; see the module docstring).

    Returns
    -------
    int64 Tensor of shape ``(n_peaks,)`` of sample indices on ``x``'s device, sorted; for a
    ``(batch, time)`` input, a list with one such tensor per row.
    """
    x = _check_input(x, sampling_rate, "ecg_peaks()")
    if method not in ECG_PEAK_METHODS:
        raise DevicepipeError(f"ecg_peaks(): unknown method {method!r}; choose one of {sorted(ECG_PEAK_METHODS)}.")
    find = ECG_PEAK_METHODS[method]
    accepted = [p.name for p in inspect.signature(find).parameters.values() if p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise DevicepipeError(
            f"ecg_peaks(): method {method!r} has no option {unknown[0]!r}; its options are {accepted or 'none'}."
        )
    rows, cols = find(x.reshape(-1, x.shape[-1]), float(sampling_rate), **options)
    per_row = split_by_row(rows, cols, 1 if x.ndim == 1 else x.shape[0])
    return per_row[0] if x.ndim == 1 else per_row


# ----------------------------------------------------------------------------- segmentation


#: Segmentation modes of :func:`ecg_segment`.
SEGMENT_MODES = ("centered", "seed")


@dataclass(frozen=True)
class Beats:
    """Beats cut from a recording, and the geometry of the cut.

    Attributes
    ----------
    matrix : Tensor of shape ``(n_kept, width)``, zero-padded.
    lengths : int64 Tensor of shape ``(n_kept,)``: samples of real signal in each row.
    peaks : int64 Tensor of shape ``(n_kept,)``: the R peak of each row.
    starts : int64 Tensor of shape ``(n_kept,)``: the sample each row starts at.
    kept : bool Tensor of shape ``(n_peaks,)``: which of the given peaks made a row.
    sampling_rate : Hz.
    mode : the segmentation mode, ``"centered"`` or ``"seed"``.
    before : samples from a row's start to its R peak (``"seed"``: the lead before the peak).
    length_range : ``(shortest, longest)`` beat in samples that ``"seed"`` keeps; None for
        ``"centered"``, whose rows all have the same length.
    """

    matrix: torch.Tensor
    lengths: torch.Tensor
    peaks: torch.Tensor
    starts: torch.Tensor
    kept: torch.Tensor
    sampling_rate: float
    mode: str = "centered"
    before: int = 0
    length_range: tuple[int, int] | None = None

    @property
    def share_kept(self) -> float:
        return float(self.kept.float().mean()) if self.kept.numel() else 0.0

    @property
    def width(self) -> int:
        """Samples per row."""
        return int(self.matrix.shape[-1])

    @property
    def window_s(self) -> float:
        """Seconds of signal a full row spans (a row resampled to ``w`` samples has a rate of ``w / window_s``)."""
        return self.width / self.sampling_rate


def ecg_segment(
    x: torch.Tensor,
    peaks: torch.Tensor,
    sampling_rate: float,
    *,
    mode: Literal["centered", "seed"] = "centered",
    before_s: float = 0.25,
    after_s: float = 0.45,
    lead_s: float = 0.304,
    lower_s: float = 0.4,
    upper_s: float = 1.024,
    width: int | None = None,
) -> Beats:
    """Cut beats out of ``x`` (shape ``(time,)``) into a fixed-width matrix.

    ``mode="centered"``: the window ``[peak - before_s, peak + after_s)`` around each R peak;
    beats whose window runs past either end of the recording are dropped (``kept`` says which).
    Rows hold ``round(before_s * fs) + round(after_s * fs)`` samples (174 at 250 Hz), or, with
    ``width``, are linearly resampled to ``width`` columns spanning the same 0.7 s (what a
    :class:`~devicepipe.models.LightVAE` of that width takes); ``lengths`` and ``before`` stay in
    samples of the recording.

    ``mode="seed"`` (the notebook's): from ``lead_s`` before one R peak to ``lead_s`` before the
    next (the notebook's gate sits 76 samples, 0.304 s, before the R peak at 250 Hz); beats
    shorter than ``lower_s`` or longer than ``upper_s`` are dropped; the rest are zero-padded
    to ``width`` samples (default ``upper_s * sampling_rate``, 256 at 250 Hz). The last peak has
    no successor and is never kept.

    Returns
    -------
    Beats with ``matrix`` of shape ``(n_kept, width)``.
    """
    if x.ndim != 1:
        raise DevicepipeError(f"ecg_segment(): x must have shape (time,), got {tuple(x.shape)}.")
    if width is not None and width < 1:
        raise DevicepipeError(f"ecg_segment(): width must be a positive number of samples, got {width}.")
    fs = float(sampling_rate)
    peaks = torch.as_tensor(peaks).to(device=x.device, dtype=torch.int64)
    n = x.shape[-1]
    if mode == "centered":
        before, after = _samples(before_s, fs, 0), _samples(after_s, fs, 0)
        kept = (peaks - before >= 0) & (peaks + after <= n)
        chosen = peaks[kept]
        matrix, _ = segment(x, chosen, before=before, after=after)
        if width is not None:
            matrix = resample_rows(matrix, width)
        lengths = torch.full_like(chosen, before + after)
        return Beats(matrix, lengths, chosen, chosen - before, kept, fs, mode, before)
    if mode == "seed":
        lead = _samples(lead_s, fs, 0)
        lower, upper = _samples(lower_s, fs), _samples(upper_s, fs)
        width = width or upper
        starts = peaks - lead
        lengths = torch.diff(starts, append=starts.new_full((1,), -1)) if peaks.numel() else starts
        kept = (lengths >= lower) & (lengths <= upper) & (starts >= 0)
        if kept.numel():
            kept[-1] = False
        matrix, _ = segment_between(x, starts[kept], lengths[kept], width=width)
        return Beats(matrix, lengths[kept], peaks[kept], starts[kept], kept, fs, mode, lead, (lower, upper))
    raise DevicepipeError(f"ecg_segment(): unknown mode {mode!r}; use one of {list(SEGMENT_MODES)}.")


# ----------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class BeatScore:
    """Detection accuracy against reference beats (ANSI/AAMI EC57 style)."""

    tp: int
    fp: int
    fn: int

    @property
    def sensitivity(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def ppv(self) -> float:
        """Positive predictivity."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def f1(self) -> float:
        return 2 * self.tp / (2 * self.tp + self.fp + self.fn) if self.tp + self.fp + self.fn else float("nan")

    def __add__(self, other: BeatScore) -> BeatScore:
        return BeatScore(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)

    def __str__(self) -> str:
        return (
            f"TP {self.tp:,}, FP {self.fp:,}, FN {self.fn:,}; sensitivity {self.sensitivity:.4f}, "
            f"positive predictivity {self.ppv:.4f}, F1 {self.f1:.4f}"
        )

    def to_dict(self) -> dict[str, float]:
        return {
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "sensitivity": self.sensitivity,
            "ppv": self.ppv,
            "f1": self.f1,
        }


def _as_host_int(values: Any, what: str = "beats") -> np.ndarray:
    """Sorted int64 sample indices; a clear error for positions that are not whole finite numbers."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    array = np.asarray(values).reshape(-1)
    if array.dtype.kind == "f":
        if not np.isfinite(array).all():
            raise DevicepipeError(f"evaluate_beats(): the {what} hold NaN or infinite positions.")
        if not np.equal(np.mod(array, 1), 0).all():
            raise DevicepipeError(f"evaluate_beats(): the {what} must be sample indices (whole numbers).")
    elif array.dtype.kind not in "iub":
        raise DevicepipeError(f"evaluate_beats(): the {what} must be sample indices, got {array.dtype}.")
    return np.sort(array.astype(np.int64))


def label_beats(
    reference: Any,
    symbols: Any,
    detected: Any,
    sampling_rate: float,
    *,
    tolerance_s: float = MATCH_TOLERANCE_S,
) -> np.ndarray:
    """The reference label of each detected beat: that of the nearest reference beat within
    ``tolerance_s``, or ``""`` where there is none.

    Parameters
    ----------
    reference : sample indices of the reference beats, shape ``(n_ref,)``, any order.
    symbols : their labels (``"N"``, ``"V"``, ...), shape ``(n_ref,)``.
    detected : sample indices of the detected beats, shape ``(n,)``, in the order wanted back.

    Returns
    -------
    str NumPy array of shape ``(n,)``, in the order of ``detected``.
    """
    ref = np.asarray(reference.detach().cpu() if isinstance(reference, torch.Tensor) else reference, dtype=np.int64)
    det = np.asarray(detected.detach().cpu() if isinstance(detected, torch.Tensor) else detected, dtype=np.int64)
    labels = np.asarray(symbols, dtype=str)
    if ref.shape != labels.shape:
        raise DevicepipeError(f"label_beats(): {ref.size} reference beats but {labels.size} labels.")
    out = np.full(det.shape, "", dtype=labels.dtype if labels.size else "<U1")
    if ref.size == 0 or det.size == 0:
        return out
    order = np.argsort(ref, kind="stable")
    ref, labels = ref[order], labels[order]
    right = np.clip(np.searchsorted(ref, det), 1, ref.size - 1) if ref.size > 1 else np.zeros_like(det)
    left = np.maximum(right - 1, 0)
    nearest = np.where(np.abs(ref[left] - det) <= np.abs(ref[right] - det), left, right)
    close = np.abs(ref[nearest] - det) <= tolerance_s * float(sampling_rate)
    out[close] = labels[nearest[close]]
    return out


def evaluate_beats(
    reference: Any,
    detected: Any,
    sampling_rate: float,
    *,
    tolerance_s: float = MATCH_TOLERANCE_S,
    n_samples: int | None = None,
    edge_s: float = EDGE_S,
) -> BeatScore:
    """Match detected beats to reference beats and count TP, FP and FN.

    A detection matches a reference beat within ``tolerance_s`` of it; each reference and each
    detection is matched at most once (closest pairs first). Beats within ``edge_s`` of either
    end are not scored (the end needs ``n_samples``, the recording's length).

    Parameters
    ----------
    reference, detected : sample indices (tensor, array or list), any order.
    sampling_rate : Hz.
    """
    fs = float(sampling_rate)
    if not (math.isfinite(fs) and fs > 0):
        raise DevicepipeError(f"evaluate_beats(): sampling_rate must be a finite, positive number of Hz, got {fs}.")
    if not (math.isfinite(tolerance_s) and tolerance_s >= 0 and math.isfinite(edge_s) and edge_s >= 0):
        raise DevicepipeError(
            f"evaluate_beats(): tolerance_s and edge_s must be finite and not negative, got {tolerance_s}, {edge_s}."
        )
    ref, det = _as_host_int(reference, "reference"), _as_host_int(detected, "detected")
    lo = edge_s * fs
    hi = np.inf if n_samples is None else n_samples - edge_s * fs
    ref = ref[(ref >= lo) & (ref < hi)]
    det = det[(det >= lo) & (det < hi)]
    tol = tolerance_s * fs
    if ref.size == 0 or det.size == 0:
        return BeatScore(0, int(det.size), int(ref.size))
    # each detection's nearest references on either side are its only candidates
    right = np.searchsorted(ref, det)
    pairs = []
    for side in (right - 1, right):
        ok = (side >= 0) & (side < ref.size)
        d_idx = np.flatnonzero(ok)
        r_idx = side[ok]
        dist = np.abs(ref[r_idx] - det[d_idx])
        close = dist <= tol
        pairs.append(np.stack([dist[close], d_idx[close], r_idx[close]], axis=1))
    candidates = np.concatenate(pairs)
    candidates = candidates[np.lexsort((candidates[:, 2], candidates[:, 1], candidates[:, 0]))]
    used_d = np.zeros(det.size, dtype=bool)
    used_r = np.zeros(ref.size, dtype=bool)
    tp = 0
    for _, d, r in candidates:
        if not used_d[d] and not used_r[r]:
            used_d[d] = used_r[r] = True
            tp += 1
    return BeatScore(tp=tp, fp=int(det.size - tp), fn=int(ref.size - tp))
