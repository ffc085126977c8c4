"""Signal quality of beats: their correlation with the recording's typical beat, alone and by
10-s stretch, and the stretches too poor to use."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch

from devicepipe.core.spill import Spill, Stored
from devicepipe.ecg.ricker import samples
from devicepipe.ecg.segment import Beats
from devicepipe.signal.blocks import (
    row_median,
)

POOR_QUALITY = 0.5


@dataclass(frozen=True)
class BeatQuality:
    """How much each cut beat looks like the recording's typical beat, alone and with its neighbours.

    Attributes
    ----------
    beat : Tensor of shape ``(n_kept,)``: the Pearson correlation of each row of the beat
        matrix with the recording's median beat, in [-1, 1].
    stretch : Tensor of shape ``(n_kept,)``: the (lower) median of ``beat`` over the beats whose
        R peak lies in the same ``window_s`` stretch of the recording (stretches from sample 0).
    window_s : the stretch length in seconds.
    """

    beat: torch.Tensor
    stretch: torch.Tensor
    window_s: float

    def usable(self, min_quality: float = POOR_QUALITY) -> torch.Tensor:
        """Bool ``(n_kept,)``: the beat and its stretch both at least ``min_quality`` (the mark of
        poor beats: a false beat in an artefact is unlike the typical beat)."""
        return (self.beat >= min_quality) & (self.stretch >= min_quality)

    def in_good_signal(self, min_quality: float = POOR_QUALITY) -> torch.Tensor:
        """Bool ``(n_kept,)``: the beat's stretch at least ``min_quality``. What ``--min-quality``
        keeps: a beat's own low correlation is also what an ectopic or otherwise anomalous beat
        shows, so it does not by itself leave a beat out of training or the flags; a stretch
        whose beats are mostly unlike the typical one is bad signal."""
        return self.stretch >= min_quality


#: Seconds of the stretches over which :func:`beat_quality` takes the median beat quality.
QUALITY_WINDOW_S = 10.0

#: The typical beat is the median of at most this many beats, evenly spaced over the recording.
TEMPLATE_BEATS = 10_000


def template_rows(n: int) -> torch.Tensor:
    """The rows :func:`typical_beat` takes of an ``n``-row matrix: at most :data:`TEMPLATE_BEATS`,
    evenly spaced, int64 ``(min(n, TEMPLATE_BEATS),)`` (so ``typical_beat(m[template_rows(n)])``
    equals ``typical_beat(m)``, and a matrix on disk need only have those rows read)."""
    return torch.linspace(0, n - 1, min(n, TEMPLATE_BEATS), dtype=torch.float64).round().long()


def typical_beat(matrix: torch.Tensor) -> torch.Tensor:
    """The recording's typical beat, ``(width,)``: the (lower) median, sample by sample, of the
    rows :func:`template_rows` picks of ``matrix`` ``(n, width)``."""
    n = matrix.shape[0]
    picked = matrix if n <= TEMPLATE_BEATS else matrix[template_rows(n).to(matrix.device)]  # (all rows: no copy)
    step = TEMPLATE_COLUMNS  # a median per column: a few columns at a time, the same values, small copies
    return torch.cat([picked[:, s : s + step].median(0).values for s in range(0, picked.shape[1], step)])


#: Columns of the typical beat's median taken at a time.
TEMPLATE_COLUMNS = 32


def beat_correlation(matrix: torch.Tensor, template: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of each row of ``matrix`` ``(n, width)`` with ``template`` ``(width,)``: ``(n,)``.

    Row by row (a product and a sum per row, no matrix product), so a row's value does not
    depend on which rows are computed with it."""
    centred = matrix - matrix.mean(1, keepdim=True)
    t = template - template.mean()
    tiny = float(torch.finfo(matrix.dtype).tiny)
    return (centred * t).sum(1) / (centred.norm(dim=1) * t.norm()).clamp(min=tiny)


def beat_quality(
    beats: Beats, *, window_s: float = QUALITY_WINDOW_S, correlation: torch.Tensor | None = None
) -> BeatQuality:
    """Signal quality of cut beats: each beat's correlation with the recording's typical beat
    (:func:`typical_beat`), and the median of that over each ``window_s`` stretch (motion
    artefacts, a loose electrode and noise bursts give beats, true or false, that do not look
    like the recording's own). ``correlation``, when given, is each row's correlation computed
    already (say chunk by chunk); ``beats.matrix`` is then not read."""
    corr = correlation
    if corr is None:
        m = beats.matrix
        corr = beat_correlation(m, typical_beat(m)) if m.shape[0] else m.new_zeros(0)
    return beat_quality_of(corr, beats.peaks, beats.sampling_rate, window_s=window_s)


def beat_quality_of(
    corr: torch.Tensor, peaks: torch.Tensor, sampling_rate: float, *, window_s: float = QUALITY_WINDOW_S
) -> BeatQuality:
    """:func:`beat_quality` of cut beats given as each one's correlation with the typical beat
    ``corr`` ``(k,)`` and its R peak ``peaks`` ``(k,)`` (samples)."""
    if corr.numel() == 0:
        return BeatQuality(corr, corr, window_s)
    stretch_of = torch.div(peaks.to(corr.device), samples(window_s, sampling_rate), rounding_mode="floor")
    return BeatQuality(corr, _stretch_median(corr, stretch_of), window_s)


#: Beats whose stretch medians are taken at a time (rounded up to a whole stretch).
QUALITY_BLOCK = 65_536


def _stretch_median(corr: torch.Tensor, stretch_of: torch.Tensor) -> torch.Tensor:
    """Each beat's stretch's (lower) median of ``corr`` (``(n,)``; ``stretch_of``: each beat's
    stretch number). With the stretches in order, as the R peaks are, :data:`QUALITY_BLOCK` beats
    at a time, cut between stretches: the same medians, with temporaries that stay small."""
    n = corr.numel()
    if n <= QUALITY_BLOCK or not bool((stretch_of[1:] >= stretch_of[:-1]).all()):
        return row_median(corr, stretch_of, int(stretch_of.max()) + 1)[stretch_of]
    out = torch.empty_like(corr)
    done = 0
    for medians in _stretch_medians_in_blocks(
        n,
        lambda s, e: (corr[s:e], stretch_of[s:e]),
        lambda e: int(torch.searchsorted(stretch_of, stretch_of[e - 1], right=True)),
    ):
        out[done : done + medians.numel()] = medians
        done += medians.numel()
    return out


def _stretch_medians_in_blocks(
    n: int,
    read: Callable[[int, int], tuple[torch.Tensor, torch.Tensor]],
    stretch_end: Callable[[int], int],
) -> Iterator[torch.Tensor]:
    """Each beat's stretch's (lower) median of its quality, :data:`QUALITY_BLOCK` beats at a
    time cut between stretches (stretches in order): ``read(s, e)`` gives beats ``[s, e)``'s
    qualities and stretch numbers, ``stretch_end(e)`` the first beat past the stretch of beat
    ``e - 1``. Yields each block's medians, one per beat, in order."""
    s = 0
    while s < n:
        e = min(n, s + QUALITY_BLOCK)
        if e < n:  # on to the end of the stretch the block's last beat is in
            e = stretch_end(e)
        corr, stretch_of = read(s, e)
        local = stretch_of - stretch_of[0]
        yield row_median(corr, local, int(local[-1]) + 1)[local]
        s = e


def stretch_quality_stored(
    corr: Stored,
    peaks: Stored,
    sampling_rate: float,
    out: Spill,
    *,
    name: str = "stretch",
    window_s: float = QUALITY_WINDOW_S,
) -> None:
    """:attr:`BeatQuality.stretch` of beats whose correlations ``corr`` and R peaks ``peaks``
    (sorted, one per value of ``corr``) are held on disk, :data:`QUALITY_BLOCK` beats at a
    time cut between stretches: appended to ``out``'s ``name``, the values :func:`beat_quality`
    gives."""
    window = samples(window_s, sampling_rate)

    def read(s: int, e: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.as_tensor(corr[s:e]), torch.div(torch.as_tensor(peaks[s:e]), window, rounding_mode="floor")

    def stretch_end(e: int) -> int:
        return peaks.searchsorted((int(peaks[e - 1]) // window + 1) * window)

    for medians in _stretch_medians_in_blocks(len(corr), read, stretch_end):
        out.append(name, medians)


def stretch_medians_stored(
    stretch: Stored, peaks: Stored, n_samples: int, sampling_rate: float, window_s: float = QUALITY_WINDOW_S
) -> torch.Tensor:
    """:func:`stretch_medians` of beats held on disk (``stretch``: each beat's stretch quality,
    ``peaks`` their R peaks): ``(ceil(n_samples / window),)``, one value per stretch of the
    recording (not per beat), NaN for a stretch holding no cut beat."""
    parts = (
        (torch.as_tensor(peaks[s : s + QUALITY_BLOCK]), torch.as_tensor(stretch[s : s + QUALITY_BLOCK]))
        for s in range(0, len(peaks), QUALITY_BLOCK)
    )
    like = torch.as_tensor(stretch[0:0])
    return _stretch_medians_of(parts, samples(window_s, sampling_rate), n_samples, like)


def poor_stretches_stored(
    stretch: Stored,
    peaks: Stored,
    n_samples: int,
    sampling_rate: float,
    min_quality: float = POOR_QUALITY,
    window_s: float = QUALITY_WINDOW_S,
) -> torch.Tensor:
    """:func:`poor_stretches` of beats held on disk (see :func:`stretch_medians_stored`)."""
    medians = stretch_medians_stored(stretch, peaks, n_samples, sampling_rate, window_s)
    return unusable_stretches(medians, samples(window_s, sampling_rate), n_samples, min_quality)


def stretch_medians(quality: BeatQuality, peaks: torch.Tensor, n_samples: int, sampling_rate: float) -> torch.Tensor:
    """The (lower) median beat quality of each ``quality.window_s`` stretch of a recording of
    ``n_samples`` samples (stretches from sample 0, the last one possibly shorter), as
    ``quality.stretch`` holds it for each beat: ``(ceil(n_samples / window),)``, NaN for a
    stretch holding no cut beat. ``peaks`` are the R peaks of the cut beats, ``(n_kept,)``, one
    per value of ``quality.stretch``."""
    parts = [(peaks.to(quality.stretch.device), quality.stretch)]
    return _stretch_medians_of(parts, samples(quality.window_s, sampling_rate), n_samples, quality.stretch)


def _stretch_medians_of(
    parts: Iterable[tuple[torch.Tensor, torch.Tensor]], window: int, n_samples: int, like: torch.Tensor
) -> torch.Tensor:
    """:func:`stretch_medians` from ``(peaks, stretch quality)`` pairs of parts of the cut beats
    (``window``: the stretch in samples; ``like``: the dtype and device of the answer)."""
    count = max(1, -(-int(n_samples) // window))
    medians = torch.full((count,), torch.nan, dtype=like.dtype, device=like.device)
    for peaks, stretch in parts:
        of = torch.div(peaks.to(like.device), window, rounding_mode="floor").clamp(0, count - 1)
        medians[of] = stretch.to(medians.dtype)  # every beat of a stretch holds that stretch's median
    return medians


def poor_stretches(
    quality: BeatQuality,
    peaks: torch.Tensor,
    n_samples: int,
    sampling_rate: float,
    min_quality: float = POOR_QUALITY,
) -> torch.Tensor:
    """The parts of a recording unusable for analysis: ``(k, 2)`` int64 ``[start, stop)`` samples,
    sorted, adjacent stretches merged. A ``quality.window_s`` stretch is unusable when its
    median beat quality (:func:`stretch_medians`) is under ``min_quality`` or it holds no cut
    beat (a lead off, noise or a flat line gives no beat like the others)."""
    medians = stretch_medians(quality, peaks, n_samples, sampling_rate)
    return unusable_stretches(medians, samples(quality.window_s, sampling_rate), n_samples, min_quality)


def unusable_stretches(medians: torch.Tensor, window: int, n_samples: int, min_quality: float) -> torch.Tensor:
    """:func:`poor_stretches` from the stretch medians (:func:`stretch_medians`, ``(stretches,)``)
    of ``window``-sample stretches: ``(k, 2)`` int64 ``[start, stop)`` samples."""
    poor = torch.isnan(medians) | (medians < min_quality)
    edges = torch.diff(
        poor.to(torch.int8), prepend=poor.new_zeros(1, dtype=torch.int8), append=poor.new_zeros(1, dtype=torch.int8)
    )
    starts = torch.nonzero(edges == 1).squeeze(1) * window
    stops = (torch.nonzero(edges == -1).squeeze(1) * window).clamp(max=int(n_samples))
    return torch.stack([starts, stops], 1).to(torch.int64)
