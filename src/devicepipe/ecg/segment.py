"""Cut beats out of an ECG into a fixed-width matrix (:func:`ecg_segment`), whole or in chunks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.spill import Stored
from devicepipe.core.units import check_peaks, hertz
from devicepipe.ecg.ricker import samples
from devicepipe.signal.resample import resample_rows
from devicepipe.signal.segment import segment, segment_between

#: How a beat is cut around its R peak (see :func:`ecg_segment`).
SegmentMode = Literal["centered", "seed"]
SEGMENT_MODES: tuple[str, ...] = get_args(SegmentMode)


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
        return int(torch.count_nonzero(self.kept)) / self.kept.numel() if self.kept.numel() else 0.0

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
    mode: SegmentMode = "centered",
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
    fs = hertz(sampling_rate, "ecg_segment()")
    peaks = torch.as_tensor(peaks).to(device=x.device, dtype=torch.int64)
    check_peaks(peaks, "ecg_segment()")  # (out of order, the peak-to-peak rows would run backwards)
    n = x.shape[-1]
    geometry = dict(before_s=before_s, after_s=after_s, lead_s=lead_s, lower_s=lower_s, upper_s=upper_s)
    if mode in SEGMENT_MODES:
        kept, lengths = _kept(peaks, n, fs, mode, **geometry)
    if mode == "centered":
        before, after = samples(before_s, fs, 0), samples(after_s, fs, 0)
        if before + after < MIN_ROW:
            raise DevicepipeError(
                f"at {fs:g} Hz a beat's window ({before_s:g} s before its R peak to {after_s:g} s after) holds "
                f"{before + after} sample(s), too few to be a beat",
                fix="is {sampling_rate} right? ECGs are sampled at 100 Hz or more.",
                param="sampling_rate",
                value=fs,
            )
        chosen = peaks[kept]
        matrix, _ = segment(x, chosen, before=before, after=after)
        if width is not None:
            matrix = resample_rows(matrix, width)
        lengths = torch.full_like(chosen, before + after)
        return Beats(matrix, lengths, chosen, chosen - before, kept, fs, mode, before)
    if mode == "seed":
        lead = samples(lead_s, fs, 0)
        lower, upper = samples(lower_s, fs), samples(upper_s, fs)
        width = width or upper
        starts = peaks - lead
        matrix, _ = segment_between(x, starts[kept], lengths[kept], width=width)
        return Beats(matrix, lengths[kept], peaks[kept], starts[kept], kept, fs, mode, lead, (lower, upper))
    raise DevicepipeError(f"ecg_segment(): unknown mode {mode!r}; use one of {list(SEGMENT_MODES)}.")


#: The fewest samples a beat's row may hold (a window shorter than this is a wrong sampling rate).
MIN_ROW = 8


def _kept(
    peaks: torch.Tensor,
    n_samples: int,
    fs: float,
    mode: str,
    *,
    before_s: float = 0.25,
    after_s: float = 0.45,
    lead_s: float = 0.304,
    lower_s: float = 0.4,
    upper_s: float = 1.024,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which ``peaks`` :func:`ecg_segment` cuts into a row (from the peaks alone), and the
    length of each peak's beat in samples (``"seed"``: to the next beat's start)."""
    if mode == "centered":
        before, after = samples(before_s, fs, 0), samples(after_s, fs, 0)
        return (peaks - before >= 0) & (peaks + after <= n_samples), torch.full_like(peaks, before + after)
    lead = samples(lead_s, fs, 0)
    lower, upper = samples(lower_s, fs), samples(upper_s, fs)
    starts = peaks - lead
    lengths = torch.diff(starts, append=starts.new_full((1,), -1)) if peaks.numel() else starts
    kept = (lengths >= lower) & (lengths <= upper) & (starts >= 0)
    if kept.numel():
        kept[-1] = False  # the last beat has no end
    return kept, lengths


def segment_kept(
    peaks: torch.Tensor, n_samples: int, sampling_rate: float, *, mode: str = "centered", **geometry: float
) -> torch.Tensor:
    """The ``kept`` mask of :func:`ecg_segment` (which of ``peaks`` make a row of its matrix),
    from the peaks and the recording's length alone: bool Tensor of shape ``(n_peaks,)``."""
    if mode not in SEGMENT_MODES:
        raise DevicepipeError(f"segment_kept(): unknown mode {mode!r}; use one of {list(SEGMENT_MODES)}.")
    return _kept(torch.as_tensor(peaks, dtype=torch.int64), n_samples, float(sampling_rate), mode, **geometry)[0]


def segment_kept_parts(
    peaks: torch.Tensor | Stored,
    n_samples: int,
    sampling_rate: float,
    *,
    part: int,
    mode: str = "centered",
    **geometry: float,
) -> Iterator[torch.Tensor]:
    """:func:`segment_kept` of sorted ``peaks`` (a tensor, or peaks held on disk), ``part`` peaks
    at a time: bool Tensors of shape ``(part,)`` (the last one shorter) that, joined, are
    the mask of one call."""
    n = len(peaks)
    for s in range(0, n, part):
        e = min(n, s + part)
        near = torch.as_tensor(peaks[s : e + 1])  # (and the next peak: a seed beat ends at it)
        yield segment_kept(near, n_samples, sampling_rate, mode=mode, **geometry)[: e - s]


def _count_below(peaks: torch.Tensor | Stored, value: int) -> int:
    """How many of the sorted ``peaks`` lie below ``value`` (a binary search, read from disk for
    peaks held there)."""
    if isinstance(peaks, torch.Tensor):
        return int(torch.searchsorted(peaks, torch.tensor([value], device=peaks.device))[0])
    return peaks.searchsorted(value)


def ecg_segment_chunked(
    read: Callable[[int, int], torch.Tensor],
    n_samples: int,
    peaks: torch.Tensor | Stored,
    sampling_rate: float,
    *,
    chunk: int,
    mode: SegmentMode = "centered",
    **options: Any,
) -> Iterator[tuple[torch.Tensor, Beats]]:
    """:func:`ecg_segment` of a recording read a chunk at a time (``read(start, stop)`` as for
    :func:`ecg_peaks_chunked`): yields, chunk by chunk, the positions in ``peaks`` of the peaks
    that fall in it (int64 ``(k,)``) and their :class:`Beats`, whose rows, stacked in order, are
    the matrix of one call on the whole recording; ``kept`` and the positions are the
    recording's. ``peaks`` are sorted: a tensor, or peaks held on disk
    (:class:`~devicepipe.core.spill.Stored`), read a chunk's worth at a time. Each chunk is cut
    with a halo longer than any beat, so a beat across a chunk border is cut whole."""
    fs = float(sampling_rate)
    if isinstance(peaks, torch.Tensor):
        peaks = torch.as_tensor(peaks, dtype=torch.int64)
    halo = 2 * max(
        samples(options.get("upper_s", 1.024), fs),
        samples(options.get("before_s", 0.25) + options.get("after_s", 0.45), fs),
    )
    chunk = max(1, int(chunk))
    for c0 in range(0, n_samples, chunk):
        c1 = min(n_samples, c0 + chunk)
        a, b = max(0, c0 - halo), min(n_samples, c1 + halo)
        first, stop = _count_below(peaks, a), _count_below(peaks, b)  # the peaks in [a, b)
        local = torch.as_tensor(peaks[first:stop], dtype=torch.int64) - a
        beats = ecg_segment(read(a, b), local, fs, mode=mode, **options)
        core = (local + a >= c0) & (local + a < c1)  # over the peaks near the chunk
        # the chunk's own rows: one run of the matrix (the peaks are sorted), taken as a view
        rows = torch.nonzero(core[beats.kept].cpu()).squeeze(1)
        keep_rows = slice(int(rows[0]), int(rows[-1]) + 1) if rows.numel() else slice(0, 0)
        chunk_beats = Beats(
            beats.matrix[keep_rows],
            beats.lengths[keep_rows],
            beats.peaks[keep_rows] + a,
            beats.starts[keep_rows] + a,
            beats.kept[core],
            fs,
            beats.mode,
            beats.before,
            beats.length_range,
        )
        yield first + torch.nonzero(core.cpu()).squeeze(1), chunk_beats


#: How long before its R peak a QRS complex starts, in seconds (half a normal QRS and a margin):
#: a neighbouring R peak this close past the end of a beat's row puts part of its QRS in the row.
QRS_LEAD_S = 0.06


def neighbours_in_rows(beats: Beats, all_peaks: torch.Tensor) -> torch.Tensor:
    """For each row of ``beats``, the offset in seconds from its R peak to the nearest other R
    peak of ``all_peaks`` (sorted, int64, every peak found) whose QRS complex reaches into the row,
    NaN where none does: shape ``(n_kept,)``, float64, on the rows' device.

    A row centred on its R peak (0.25 s before, 0.45 s after) holds the start of the next beat's
    QRS when that beat comes within about 0.5 s (a premature beat): the row then differs from a
    typical one because of its neighbour, not its own shape. Rows of the ``"seed"`` mode run from
    beat to beat by construction, so every offset is NaN for them.
    """
    n = beats.peaks.numel()
    out = torch.full((n,), float("nan"), dtype=torch.float64, device=beats.peaks.device)
    if beats.mode != "centered" or n == 0 or all_peaks.numel() < 2:
        return out
    peaks = all_peaks.to(beats.peaks.device)
    lead = QRS_LEAD_S * beats.sampling_rate
    after = torch.searchsorted(peaks, beats.peaks, right=True)
    before = torch.searchsorted(peaks, beats.peaks, right=False) - 1
    ends = (beats.starts + beats.lengths).double()
    nxt = peaks[after.clamp(max=peaks.numel() - 1)].double()
    has_next = (after < peaks.numel()) & (nxt - lead < ends)
    prev = peaks[before.clamp(min=0)].double()
    has_prev = (before >= 0) & (prev + lead >= beats.starts.double())
    r = beats.peaks.double()
    out = torch.where(has_prev, (prev - r) / beats.sampling_rate, out)
    closer_next = has_next & (~has_prev | (nxt - r < r - prev))
    return torch.where(closer_next, (nxt - r) / beats.sampling_rate, out)
