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
   of the local noise floor, the mean response of the quietest block nearby (so flat and
   noise-only stretches give no beats, and a tall ectopic beat does not hide its neighbours);
5. Pan and Tompkins' T-wave rule: a candidate within 0.36 s of the previous one, at under
   half the smaller of its height and the local beat level, is dropped;
6. polarity as weak evidence: most QRS complexes of one lead show the filter one polarity
   and motion artefacts come with either sign, but an equiphasic complex (R about as deep as
   S, common in transitional leads) shows either from beat to beat, and ventricular ectopic
   beats often show the other. So a candidate of the recording's minority polarity that does
   not stand ``polarity_ratio`` (1.5) times above its typical beat level is not a beat on its
   own: it waits for step 7;
7. Pan and Tompkins' search-back: where two beats lie more than ``searchback_rr`` (1.66) times
   the usual interval apart (the median of the neighbouring intervals), the highest candidate
   between them above ``searchback_ratio`` (half) of the threshold, and above the recording's
   floors, is a beat, at least 0.36 s after the first and a refractory period before the
   second; repeated while a gap gains a beat;
8. each beat refined to the extremum of the signal itself, with the polarity the filter saw.

``"seed"`` is the recipe of the zero-copy ECG notebook, kept as it was (30-tap Ricker over
``[-3, 3]``, causal convolution, window-180 non-maximum suppression at 250 Hz, no threshold),
with its sizes scaled from 250 Hz to the recording's rate.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np
import torch

from devicepipe.device import all_finite
from devicepipe.errors import DevicepipeError
from devicepipe.io.spill import Spill, Stored
from devicepipe.signal.blocks import (
    block_reduce,
    centred_window,
    lower_median_of_parts,
    neighbour_median,
    row_median,
)
from devicepipe.signal.filters import TOEPLITZ_BLOCK, centred_convolve, convolve
from devicepipe.signal.peaks import peak_mask, sliding_max, split_by_row
from devicepipe.signal.resample import resample_rows
from devicepipe.signal.segment import segment, segment_between
from devicepipe.signal.wavelets import ricker

__all__ = [
    "AAMI_CLASSES",
    "ECG_PEAK_METHODS",
    "EDGE_S",
    "MATCH_TOLERANCE_S",
    "SEGMENT_MODES",
    "BeatScore",
    "BeatQuality",
    "Beats",
    "beat_correlation",
    "beat_quality",
    "poor_stretches",
    "ricker_defaults",
    "stretch_medians",
    "template_rows",
    "typical_beat",
    "check_ecg",
    "ecg_contrast",
    "ecg_peaks",
    "detection_chunk",
    "ecg_peaks_chunked",
    "ecg_segment",
    "ecg_segment_chunked",
    "aami_class",
    "evaluate_beats",
    "label_beats",
    "segment_kept",
    "seed_gates",
]

#: A detected beat matches a reference beat within this many seconds (ANSI/AAMI EC57's 150 ms).
MATCH_TOLERANCE_S = 0.15
#: Beats this close (s) to either end of a recording are not scored against a reference.
EDGE_S = 0.5

SEED_RATE_HZ = 250.0
#: The response's median (the contrast's denominator) is judged on about this many of its samples,
#: evenly spaced.
SUBSAMPLE = 200_000  # the notebook's recording (UCR "ECG one day") is sampled at 250 Hz
#: A typical QRS response at or under this fraction of the signal's magnitude is float rounding
#: of a constant (a flat or saturated lead), not a heart: the filter's rounding error is about
#: 1e-6 of the magnitude, an ECG's QRS response a sizeable fraction of its amplitude.
ROUNDING = 1e-5


def _check_input(x: torch.Tensor, sampling_rate: float, where: str, *, leads: bool = False) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise DevicepipeError(f"{where}: expected a torch.Tensor, got {type(x).__name__}.")
    if leads and x.ndim not in (2, 3):
        raise DevicepipeError(
            f"{where}: leads='fuse' expects shape (leads, time) or (batch, leads, time), got {tuple(x.shape)}."
        )
    if not leads and x.ndim not in (1, 2):
        hint = "; for several leads of each recording pass leads='fuse'" if x.ndim == 3 else ""
        raise DevicepipeError(f"{where}: expected shape (time,) or (batch, time), got {tuple(x.shape)}{hint}.")
    x = x.detach() if x.dtype.is_floating_point else x.detach().to(torch.float32)  # no autograd; integers as float
    if not sampling_rate or not sampling_rate > 0 or not math.isfinite(sampling_rate):
        raise DevicepipeError(f"{where}: sampling_rate must be a finite, positive number of Hz, got {sampling_rate}.")
    if not all_finite(x):
        # one NaN or inf would spread through the filter and erase every beat: refuse, never answer wrongly
        bad = ~torch.isfinite(x)
        first = int(torch.nonzero(bad.reshape(-1, x.shape[-1]).any(0))[0])
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


def check_ecg(x: torch.Tensor, sampling_rate: float) -> None:
    """The checks :func:`ecg_peaks` makes on its input (a tensor of shape ``(time,)`` or
    ``(batch, time)``, finite, at least 2 s at ``sampling_rate`` Hz): a clear
    :class:`DevicepipeError` for the first that fails, nothing otherwise."""
    _check_input(x, sampling_rate, "ecg_peaks()")


def _samples(seconds: float, sampling_rate: float, minimum: int = 1) -> int:
    return max(minimum, int(round(seconds * sampling_rate)))


# ----------------------------------------------------------------------------- default method


@dataclass(frozen=True)
class _Ricker:
    """The ``"ricker"`` detector's settings at one sampling rate, in samples, and its steps.

    The steps are split so that a recording too long for memory is detected in chunks with
    exactly the peaks of one call (:func:`ecg_peaks_chunked`): what needs the whole recording
    (the block envelope and its median, the contrast, the polarity vote) is computed from small
    per-block summaries and per-candidate values; everything else looks a fixed number of
    samples either side (:attr:`reach`).
    """

    fs: float
    sigma_s: float = 0.015
    refractory_s: float = 0.2
    block_s: float = 0.5
    envelope_s: float = 2.0
    level_s: float = 6.0
    threshold: float = 0.4
    global_floor: float = 0.1
    noise_factor: float = 3.0
    refine_s: float = 0.05
    close_s: float = 0.36
    close_ratio: float = 0.5
    min_contrast: float = 6.0
    polarity_ratio: float = 1.5
    searchback_rr: float = 1.66
    searchback_ratio: float = 0.5
    edge_s: float = 1.0  # the level the filter assumes past either end: the mean of this first/last stretch

    @property
    def block(self) -> int:
        return _samples(self.block_s, self.fs)

    @property
    def sub(self) -> int:
        return _samples(0.016, self.fs)

    @property
    def refractory(self) -> int:
        return _samples(self.refractory_s, self.fs, 2)

    def kernel(self, like: torch.Tensor) -> torch.Tensor:
        width = self.sigma_s * self.fs
        kernel = ricker(2 * math.ceil(4 * width) + 1, width, dtype=torch.float64)
        return (kernel - kernel.mean()).to(device=like.device, dtype=like.dtype)  # zero-sum: blind to any offset

    @property
    def reach(self) -> int:
        """Samples either side of a stretch that decide its candidates: the filter, the
        refractory period, the sub-blocks and the refinement window."""
        width = self.sigma_s * self.fs
        return 2 * math.ceil(4 * width) + 1 + self.refractory + 2 * self.sub + _samples(self.refine_s, self.fs) + 2

    @property
    def alignment(self) -> int:
        """Chunks start at multiples of this (blocks, sub-blocks and the convolution's 32-sample
        rows, :data:`~devicepipe.signal.filters.TOEPLITZ_BLOCK`, then fall on the same samples as in
        one call)."""
        return math.lcm(self.block, self.sub, TOEPLITZ_BLOCK)

    def edge_means(self, head: torch.Tensor, tail: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean of the first and of the last ``edge_s`` of each row (``(batch, 1)`` each),
        from ``head``/``tail``: at least that stretch from each end."""
        m = min(_samples(self.edge_s, self.fs), head.shape[-1], tail.shape[-1])
        return head[:, :m].mean(-1, keepdim=True), tail[:, tail.shape[-1] - m :].mean(-1, keepdim=True)

    def feature(
        self, x: torch.Tensor, kernel: torch.Tensor, head: torch.Tensor, tail: torch.Tensor, start: bool, end: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``|Ricker response|`` of ``x`` (``(batch, n)``), the signal taken to continue at the
        level ``head`` before its start and ``tail`` after its end, where ``x`` reaches the
        recording's ``start``/``end`` (elsewhere the outer samples are not used); and where the
        response is negative (bool, same shape: the polarity the filter sees)."""
        zero = torch.zeros_like(head)
        response = centred_convolve(x, head if start else zero, kernel, end_mean=tail if end else zero)
        # (signbit: a quarter faster than `< 0`; it differs only at -0.0, a zero response, which
        # no threshold passes)
        negative = torch.signbit(response)
        return response.abs_(), negative

    def summaries(self, feature: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-block maximum and mean of the feature, ``(batch, ceil(n / block))`` each."""
        return block_reduce(feature, self.block, "max"), block_reduce(feature, self.block, "mean")

    @staticmethod
    def subsample_stride(n: int) -> int:
        return max(1, n // SUBSAMPLE)  # the median of a subsample is enough

    def contrast(self, block_max: torch.Tensor, subsample: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's typical QRS response (the median of its envelope, as :meth:`thresholds`
        takes it) and its contrast, that over the median response, ``(batch,)`` each: how far
        beats stand above the rest (Gaussian noise 4.3 to 5.3, real recordings 6.5 to 110; 0 for a
        row with no response)."""
        typical = self.envelope(block_max).median(-1).values
        median = subsample.median(-1).values
        tiny = float(torch.finfo(block_max.dtype).tiny)
        return typical, torch.where(typical > 0, typical / median.clamp(min=tiny), torch.zeros_like(typical))

    def thresholds(
        self,
        block_max: torch.Tensor,
        block_mean: torch.Tensor,
        subsample: torch.Tensor,
        magnitude: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The threshold, the local beat level and the search-back threshold of every block,
        ``(batch, blocks)`` each, from the block summaries of the whole recording and a subsample
        of its feature (every :meth:`subsample_stride`-th).

        The envelope: the strongest response within +-envelope_s/2, the weakest of those over
        level_s; the threshold a fraction of it, never below a fraction of the recording's
        typical QRS level (the envelope's median) nor a multiple of the local noise floor: the
        mean response of the quietest block within the envelope window. (The mean over the whole
        window counts the beats in it, so one tall ectopic beat would lift the threshold over its
        smaller neighbours; the quietest half-second is the floor the beats stand on.) A row
        whose typical QRS response does not stand well above its median response holds no ECG
        (Gaussian noise, white or coloured, gives 4.3 to 5.3 at any rate, the noisiest real
        10-s ECGs 6.5, long clean recordings up to 110: see benchmarks/ecg_robustness.py): it gets
        an infinite threshold; so does a row whose typical response is float rounding next to
        ``magnitude`` (see :data:`ROUNDING`).

        The search-back threshold (see :func:`_search_back`) is ``searchback_ratio`` of the
        threshold, but never under the recording's floors (the fraction of its typical QRS level,
        the multiple of the noise floor): it looks for a beat smaller than its neighbours, not
        for one inside noise.
        """
        envelope = self.envelope(block_max)
        return self.local_thresholds(envelope, block_mean, *self.typical_level(envelope, subsample, magnitude))

    @property
    def threshold_reach(self) -> int:
        """Blocks either side of a stretch of blocks that decide its :meth:`local_thresholds`."""
        span = _samples(self.envelope_s / self.block_s, 1.0)
        return span + _samples(self.level_s / self.block_s, 1.0) + 2

    def envelope(self, block_max: torch.Tensor) -> torch.Tensor:
        """The strongest block maximum within +-envelope_s/2 of each block, ``(batch, blocks)``."""
        return centred_window(block_max, _samples(self.envelope_s / self.block_s, 1.0), "max")

    def typical_level(
        self, envelope: torch.Tensor, subsample: torch.Tensor, magnitude: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """What :meth:`thresholds` takes from the whole recording's :meth:`envelope`: each row's
        typical QRS response (the envelope's median, ``(batch, 1)``) and whether the row holds no
        ECG (``(batch,)`` bool, :meth:`no_ecg`)."""
        typical = envelope.median(-1, keepdim=True).values
        return typical, self.no_ecg(typical, subsample, magnitude)

    def no_ecg(
        self, typical: torch.Tensor, subsample: torch.Tensor, magnitude: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Whether each row holds no ECG (``(batch,)`` bool), from its typical QRS response
        ``typical`` (``(batch, 1)``, :meth:`typical_level`), a subsample of its feature and the
        signal's size ``magnitude`` (see :meth:`thresholds`)."""
        # contrast = typical / median(subsample) < min_contrast, that is, the (lower) median above
        # typical / min_contrast: at most (k - 1) // 2 of the k samples at or below it. A count,
        # not a median: the same answer (but at the boundary's last bit) in one pass, where a
        # median per row of a (batch, time) input costs a selection each.
        limit = typical / self.min_contrast
        group = max(1, (1 << 18) // max(1, subsample.shape[-1]))  # rows at a time: small temporaries
        below = (
            torch.cat(
                [
                    (part <= lim).sum(-1, dtype=torch.int32)  # (int32: 5x faster)
                    for part, lim in zip(subsample.split(group), limit.split(group), strict=True)
                ]
            )
            if subsample.shape[0] > group
            else (subsample <= limit).sum(-1, dtype=torch.int32)
        )
        no_ecg = (below <= (subsample.shape[-1] - 1) // 2) | (typical.squeeze(-1) <= 0)
        if magnitude is not None:  # (batch,): the signal's size, to tell a response from rounding
            no_ecg |= typical.squeeze(-1) <= ROUNDING * magnitude
        return no_ecg

    def local_thresholds(
        self, envelope: torch.Tensor, block_mean: torch.Tensor, typical: torch.Tensor, no_ecg: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`thresholds` from the :meth:`envelope`, the block means and :meth:`typical_level`'s
        answer. Each block's values depend on the block summaries :attr:`threshold_reach` blocks
        either side, so a stretch of blocks with that many more on each side (or the recording's
        end) gives the stretch's values of the whole recording."""
        span = _samples(self.envelope_s / self.block_s, 1.0)
        level = centred_window(envelope, _samples(self.level_s / self.block_s, 1.0), "min")
        noise = centred_window(block_mean, span, "min")
        floor = torch.maximum(self.global_floor * typical, self.noise_factor * noise)
        per_block = torch.maximum(self.threshold * level, floor)
        per_block = torch.clamp(per_block, min=float(torch.finfo(envelope.dtype).tiny))
        per_block[no_ecg] = torch.inf
        return per_block, level, torch.maximum(self.searchback_ratio * per_block, floor)

    def candidates(
        self, x: torch.Tensor, feature: torch.Tensor, negative: torch.Tensor, offset: int, core: tuple[int, int]
    ) -> dict[str, torch.Tensor]:
        """The candidates of ``x`` (samples ``offset ...`` of a recording) whose position lies in
        ``core`` (absolute samples), before any threshold: rows, absolute columns, the feature's
        height, the response's sign and the refined (absolute) position. Nothing here depends
        on the rest of the recording (see :meth:`accept`)."""
        rows, cols = _coarse_peaks(feature, self.refractory, self.sub)
        inside = (cols >= core[0] - offset) & (cols < core[1] - offset)
        rows, cols = rows[inside], cols[inside]
        sign = 1 - 2 * negative[rows, cols].to(x.dtype)  # +1 or -1: the polarity the filter saw
        refined = _refined(x, sign, rows, cols, _samples(self.refine_s, self.fs)) + offset
        return {"rows": rows, "cols": cols + offset, "height": feature[rows, cols], "sign": sign, "refined": refined}

    def accept(
        self,
        c: dict[str, torch.Tensor],
        per_block: torch.Tensor,
        level: torch.Tensor,
        secondary: torch.Tensor,
        first_block: int = 0,
    ) -> dict[str, torch.Tensor]:
        """The candidates above their block's threshold (``strong``), and, where the search-back
        is on, those above the ``secondary`` threshold (its only candidates), with the local
        beat level at each. The three tensors are :meth:`thresholds`' answer, for the blocks
        from ``first_block`` on. ``c`` may be one row's candidates as :func:`_packed` holds them
        (no row numbers); the answer is then held so too."""
        blocks = c["cols"] // self.block - first_block
        rows = c["rows"] if "rows" in c else 0
        strong = c["height"] > per_block[rows, blocks]
        keep = strong | (c["height"] > secondary[rows, blocks]) if self.searchback_rr > 0 else strong
        taken = torch.nonzero(keep).squeeze(1)
        kept = {key: value[taken] for key, value in c.items()}
        kept["level"] = level[kept["rows"] if "rows" in c else 0, blocks[taken]]
        kept["strong"] = strong[taken]
        return kept

    def select(self, c: dict[str, torch.Tensor], n_rows: int, total: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The peaks among all candidates of a recording (sorted by row, then column): the
        T-wave rule, the polarity rule, then each at its refined position, without repeats."""
        rows, _, refined, _ = self.beats(c, n_rows, total)
        return _unique_peaks(rows, refined, total)

    def _followers(self, rows: torch.Tensor, cols: torch.Tensor, height: torch.Tensor, level: torch.Tensor):
        """The T-wave rule's mask over strong candidates (see :func:`_weak_followers`), or None when off."""
        if self.close_ratio > 0 and cols.numel() > 1:
            return _weak_followers(rows, cols, height, level, _samples(self.close_s, self.fs), self.close_ratio)
        return None

    def beats(
        self,
        c: dict[str, torch.Tensor],
        n_rows: int,
        total: int,
        polarity: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The beats among candidates ``c`` (sorted by row, then column), before repeats are
        merged: their rows, columns and refined columns, and the columns of the beats the rules
        took before the search-back. ``polarity``: each row's dominant polarity and typical beat
        level ``(n_rows,)`` (:meth:`polarity_of`), when ``c`` is a part of the recording."""
        # (masks turned into positions once: a boolean index finds its positions anew each time)
        names = ("rows", "cols", "level", "height", "sign", "refined")
        strong = c["strong"]  # set by accept()
        taken, left = _positions(strong)
        rows, cols, level, height, sign, refined = (c[k][taken] for k in names)
        weak = tuple(c[k][left] for k in ("rows", "cols", "refined", "height"))
        follower = self._followers(rows, cols, height, level)
        if follower is not None:
            taken = torch.nonzero(~follower).squeeze(1)
            rows, cols, level, height, sign, refined = (v[taken] for v in (rows, cols, level, height, sign, refined))
        if self.polarity_ratio > 0 and cols.numel():
            dominant, typical = polarity or _polarity(rows, sign, level, n_rows)
            keep = (sign == dominant[rows]) | (dominant[rows] == 0) | (height >= self.polarity_ratio * typical[rows])
            taken, left = _positions(keep)
            if self.searchback_rr > 0:  # the others are weak evidence: beats only where the rhythm wants one
                both = [torch.cat([w, v[left]]) for w, v in zip(weak, (rows, cols, refined, height), strict=True)]
                order = torch.argsort(both[0] * total + both[1])
                weak = tuple(v[order] for v in both)
            rows, cols, refined = rows[taken], cols[taken], refined[taken]
        plain = cols
        if self.searchback_rr > 0 and weak[0].numel():
            clearance = (_samples(self.close_s, self.fs), self.refractory)
            rows, cols, refined = _search_back((rows, cols, refined), weak, total, self.searchback_rr, clearance)
        return rows, cols, refined, plain

    def polarity_of(self, held: _Held, block: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The polarity rule's whole-recording figures for one row's candidates ``held`` (their
        columns, heights, levels and signs are read): its dominant polarity and typical beat
        level, ``(1,)`` each, as :meth:`beats` finds them, from ``block`` candidates at a time
        (and the last strong one before each block, which the T-wave rule looks back to). The
        levels of the beats wait on disk for their median (:func:`lower_median_of_parts`)."""
        keys = ("cols", "height", "level", "sign")
        signs = torch.zeros(1, device=held.device, dtype=held.dtype)
        before: tuple[torch.Tensor, ...] = ()
        levels = held.prefix + "beat_levels"
        for s in range(0, held.n, block):
            c = held.part(s, s + block, keys + ("strong",))
            strong = torch.nonzero(c["strong"]).squeeze(1)
            cols, height, level, sign = (c[k][strong] for k in keys)
            if before:
                cols, height, level, sign = (
                    torch.cat([b, v]) for b, v in zip(before, (cols, height, level, sign), strict=True)
                )
            follower = self._followers(torch.zeros_like(cols), cols, height, level)
            kept = torch.ones_like(cols, dtype=torch.bool) if follower is None else ~follower
            kept[: 1 if before else 0] = False  # the block before decided that one
            signs += sign[kept].sum(dtype=signs.dtype)
            held.spill.append(levels, level[kept])
            if cols.numel():
                before = tuple(v[-1:] for v in (cols, height, level, sign))
        if not held.spill.size(levels):
            return torch.sign(signs), torch.zeros(1, device=held.device, dtype=held.dtype)
        # one row: its lower median, as row_median() gives it
        typical = lower_median_of_parts(lambda: held.spill.parts(levels, MEDIAN_PART))
        return torch.sign(signs), typical.reshape(1).to(held.device)


def _abs_max(x: torch.Tensor) -> torch.Tensor:
    """``x.abs().amax(-1)`` for ``x`` of shape ``(batch, n)`` without a full-size temporary."""
    return torch.maximum(x.amax(-1), -x.amin(-1))  # (two passes: aminmax is several times slower on the CPU)


def _positions(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Where a bool ``(n,)`` mask is True, and where it is False (int64, increasing)."""
    true = torch.nonzero(mask).squeeze(1)
    false = torch.nonzero(~mask).squeeze(1)
    return true, false


#: Samples per group of rows, per torch thread, that a batch is detected in on the CPU: a
#: group's arrays stay in the caches, where each of the many passes over a whole batch went to
#: main memory (on one thread, 1,000 rows of 5,000 samples about 10 % faster in groups of 209,
#: 8 rows of a million samples a fifth faster one at a time; on two threads, groups twice as
#: large, as fast as one piece). Rows are independent: the same peaks.
BATCH_GROUP_SAMPLES = 1 << 20


def _peaks_ricker(x: torch.Tensor, sampling_rate: float, **options: float) -> tuple[torch.Tensor, torch.Tensor]:
    """R peaks of each row of ``x`` (shape ``(batch, time)``): their rows and columns, sorted."""
    per_group = max(1, BATCH_GROUP_SAMPLES * torch.get_num_threads() // x.shape[-1])
    if x.device.type != "cpu" or x.shape[0] <= per_group:
        return _peaks_ricker_rows(x, sampling_rate, **options)
    found = [_peaks_ricker_rows(part, sampling_rate, **options) for part in x.split(per_group)]
    rows = torch.cat([part_rows + i * per_group for i, (part_rows, _) in enumerate(found)])
    return rows, torch.cat([cols for _, cols in found])


def _peaks_ricker_rows(x: torch.Tensor, sampling_rate: float, **options: float) -> tuple[torch.Tensor, torch.Tensor]:
    r = _Ricker(float(sampling_rate), **options)
    n = x.shape[-1]
    means, kernel = r.edge_means(x, x), r.kernel(x)
    feature, negative = r.feature(x, kernel, *means, start=True, end=True)
    stride = r.subsample_stride(n)
    magnitude = _abs_max(x[..., ::stride])
    limits = r.thresholds(*r.summaries(feature), feature[..., ::stride], magnitude)
    cands = r.accept(r.candidates(x, feature, negative, 0, (0, n)), *limits)
    return r.select(cands, x.shape[0], n)


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


#: Neighbouring beat intervals either side of a gap whose median is the gap's usual interval.
RR_NEIGHBOURS = 4


def _polarity(
    rows: torch.Tensor, sign: torch.Tensor, level: torch.Tensor, n_rows: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's dominant polarity, the majority sign of its candidates' filtered response (0 in
    a tie), and its typical beat level, the (lower) median of their levels: ``(n_rows,)`` each."""
    sums = torch.zeros(n_rows, device=sign.device, dtype=sign.dtype).index_add_(0, rows, sign)
    return torch.sign(sums), row_median(level, rows, n_rows)


def _unique_peaks(rows: torch.Tensor, refined: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows and columns of the beats at their refined positions, sorted, without repeats (two
    candidates may settle on one sample)."""
    key = torch.unique(rows * total + refined)
    return key // total, key % total


#: How many times the search-back looks again for gaps that still want a beat.
SEARCH_BACK_PASSES = 8
#: Beats of a part of the recording on each side of the stretch it decides, for chunked detection
#: to give the peaks of one call: the search-back's usual interval sees RR_NEIGHBOURS intervals
#: either side, so a part's edge can change the beats at most that far in on each pass, plus
#: two for the T-wave rule's look back at the edge.
SELECT_HALO_BEATS = SEARCH_BACK_PASSES * (RR_NEIGHBOURS + 1) + 2
#: Candidates per part when chunked detection applies the rules (memory a few times this many).
SELECT_BLOCK = 16_384


def _search_back(
    beats: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    weak: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    total: int,
    rr_limit: float,
    clearance: tuple[int, int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Beats missed by the threshold, found again in the gaps the rhythm says hold one.

    The search-back of Pan and Tompkins (IEEE TBME 32(3), 1985): where the interval between
    two beats exceeds ``rr_limit`` times the usual interval (the median of the neighbouring
    :data:`RR_NEIGHBOURS` intervals either side), a beat was probably missed; the highest
    ``weak`` candidate (above the secondary threshold) inside the gap is taken, at least
    ``clearance[0]`` samples after the first beat (the T-wave reach) and ``clearance[1]`` before
    the second (the refractory period). Repeated while gaps gain a beat.

    ``beats``: (rows, columns, refined columns) sorted by row then column; ``weak``: (rows,
    columns, refined columns, heights) likewise. Returns the rows, columns and refined columns
    of all beats, sorted.
    """
    rows, cols, refined = beats
    w_rows, w_cols, w_refined, w_height = weak
    after, before = clearance
    for _ in range(SEARCH_BACK_PASSES):  # each pass fills at most one beat per gap
        same = rows[1:] == rows[:-1]
        g_rows, g_start, g_end = rows[:-1][same], cols[:-1][same], cols[1:][same]
        if g_rows.numel() == 0 or w_rows.numel() == 0:
            break
        usual = neighbour_median((g_end - g_start).to(torch.float64), RR_NEIGHBOURS, rows=g_rows)
        long = (g_end - g_start) > rr_limit * usual
        if not bool(long.any()):
            break
        gap = torch.searchsorted(g_rows * total + g_start, w_rows * total + w_cols, right=True) - 1
        inside = gap >= 0
        gap = gap.clamp(min=0)
        inside &= (g_rows[gap] == w_rows) & long[gap]
        inside &= (w_cols - g_start[gap] >= after) & (g_end[gap] - w_cols >= before)
        if not bool(inside.any()):
            break
        height = torch.where(inside, w_height, -torch.inf)
        best = torch.full_like(g_start, -1, dtype=height.dtype).scatter_reduce(0, gap, height, "amax")
        chosen = torch.nonzero(inside & (height == best[gap])).squeeze(1)
        first = torch.ones_like(chosen, dtype=torch.bool)
        first[1:] = gap[chosen][1:] != gap[chosen][:-1]  # one per gap (the first of equal heights)
        chosen = chosen[first]
        order = torch.argsort(torch.cat([rows * total + cols, w_rows[chosen] * total + w_cols[chosen]]))
        rows = torch.cat([rows, w_rows[chosen]])[order]
        cols = torch.cat([cols, w_cols[chosen]])[order]
        refined = torch.cat([refined, w_refined[chosen]])[order]
        left = torch.ones_like(w_rows, dtype=torch.bool)
        left[chosen] = False
        w_rows, w_cols, w_refined, w_height = w_rows[left], w_cols[left], w_refined[left], w_height[left]
    return rows, cols, refined


def _weak_followers(
    rows: torch.Tensor, cols: torch.Tensor, height: torch.Tensor, level: torch.Tensor, reach: int, ratio: float
) -> torch.Tensor:
    """Which candidates follow another within ``reach`` samples at under ``ratio`` of the
    smaller of that one's height and the local beat ``level`` (so a normal beat after a tall
    ectopic one stays).

    The T-wave rule of Pan and Tompkins (IEEE TBME 32(3), 1985): a weak deflection shortly
    after a beat is more likely its T wave, or noise, than a new beat.
    """
    close = (rows[1:] == rows[:-1]) & (cols[1:] - cols[:-1] <= reach)
    weak = torch.zeros_like(cols, dtype=torch.bool)
    weak[1:] = close & (height[1:] < ratio * torch.minimum(height[:-1], level[1:]))
    return weak


def _coarse_peaks(feature: torch.Tensor, min_distance: int, sub: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-maximum suppression on maxima of ``sub``-sample blocks, then the argmax inside each winner.

    The same candidates as ``peak_mask(feature, min_distance=...)`` up to a refractory period
    coarsened by under ``sub`` samples, at a ``sub``-th of the cost of the sliding maximum.
    """
    if sub <= 1:
        return torch.nonzero(peak_mask(feature, min_distance=min_distance), as_tuple=True)
    n = feature.shape[-1]
    maxima = block_reduce(feature, sub, "max")
    # (the feature is finite: the input was checked, and the filter's response of finite samples is)
    rows, blocks = torch.nonzero(
        peak_mask(maxima, min_distance=max(2, -(-min_distance // sub)), finite=True), as_tuple=True
    )
    # the first maximum inside each winning block (a clamped index repeats the last sample: no earlier tie)
    idx = (blocks[:, None] * sub + torch.arange(sub, device=feature.device)).clamp(max=n - 1)
    inside = feature[rows[:, None], idx].argmax(-1)
    return rows, blocks * sub + inside


def _refined(
    x: torch.Tensor, polarity: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, reach: int
) -> torch.Tensor:
    """Each candidate moved to the extremum of ``x`` within ``reach`` samples, in the filter's
    ``polarity`` (+1 or -1 per candidate): the new columns, ``(n,)``."""
    if rows.numel() == 0:
        return cols
    n, width = x.shape[-1], 2 * reach + 1
    start = cols - reach
    if n >= width:  # each window a slice of a strided view (a copy of whole rows, not a gather per sample)
        windows = x.as_strided((x.shape[0], n - width + 1, width), (x.stride(0), x.stride(1), x.stride(1)),
                               x.storage_offset())  # fmt: skip
        edge = torch.nonzero((start < 0) | (start > n - width)).squeeze(1)
        window = windows[rows, start.clamp(0, n - width)]
    else:
        edge = torch.arange(rows.numel(), device=x.device)
        window = x.new_empty(rows.numel(), width)
    if edge.numel():  # windows that run past an end repeat the end sample
        idx = (cols[edge, None] + torch.arange(-reach, reach + 1, device=x.device)).clamp(0, n - 1)
        window[edge] = x[rows[edge, None], idx]
    best = ((window - window.mean(-1, keepdim=True)) * polarity[:, None]).argmax(-1)
    refined = start + best
    if edge.numel():
        refined[edge] = idx.gather(1, best[edge, None]).squeeze(1)
    return refined


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


def ricker_defaults() -> dict[str, float]:
    """The ``"ricker"`` method's settings and their defaults (seconds, ratios and factors; see
    the module docstring), as :func:`ecg_peaks` takes them by keyword."""
    return {f.name: f.default for f in fields(_Ricker) if f.name != "fs"}


def ecg_contrast(x: torch.Tensor, sampling_rate: float, **options: float) -> torch.Tensor:
    """How far beats stand above the rest in each row of ``x`` (``(time,)`` or ``(batch, time)``):
    the typical QRS response of the ``"ricker"`` filter over its median response, ``(batch,)``
    (a scalar for one row). A row under ``min_contrast`` (6) is taken to hold no ECG."""
    x = _check_input(x, sampling_rate, "ecg_contrast()")
    rows = x.reshape(-1, x.shape[-1])
    r = _Ricker(float(sampling_rate), **options)
    feature, _ = r.feature(rows, r.kernel(rows), *r.edge_means(rows, rows), start=True, end=True)
    block_max, _ = r.summaries(feature)
    contrast = r.contrast(block_max, feature[..., :: r.subsample_stride(rows.shape[-1])])[1]
    return contrast[0] if x.ndim == 1 else contrast


def _options_of(method: str) -> list[str]:
    """The keyword settings a peak method accepts."""
    if method == "ricker":
        return list(ricker_defaults())
    find = ECG_PEAK_METHODS[method]
    return [p.name for p in inspect.signature(find).parameters.values() if p.kind is p.KEYWORD_ONLY]


def ecg_peaks(
    x: torch.Tensor, sampling_rate: float, *, method: str = "ricker", leads: str = "each", **options: Any
) -> torch.Tensor | list[torch.Tensor]:
    """Find the R peaks of an ECG.

    Parameters
    ----------
    x : Tensor of shape ``(time,)``, or ``(batch, time)`` for many equal-length recordings
        processed in one pass; with ``leads="fuse"``, ``(leads, time)`` for the leads of one
        recording or ``(batch, leads, time)``; any device.
    sampling_rate : Hz (125 to 1000 Hz tested).
    method : a key of ``ECG_PEAK_METHODS``: ``"ricker"`` (default) or ``"seed"``.
    leads : ``"each"`` (default: every row is a recording of its own) or ``"fuse"`` (the rows of
        ``x`` are leads of one recording, and one set of beats is found from all of them: each
        10-s stretch takes the beats of the lead whose beats there look most like its typical
        beat, so a lead with artefacts, noise or a lost contact is passed over where it has
        them; ``"ricker"`` only).
    options : keyword settings of the method (for ``"ricker"``: ``sigma_s``, ``refractory_s``,
        ``threshold``, ... in seconds or as fractions; see the module docstring).

    Returns
    -------
    int64 Tensor of shape ``(n_peaks,)`` of sample indices on ``x``'s device, sorted; for a
    ``(batch, time)`` input (``(batch, leads, time)`` when fused), a list with one such tensor
    per recording.
    """
    if leads not in ("each", "fuse"):
        raise DevicepipeError(f"ecg_peaks(): leads must be 'each' or 'fuse', got {leads!r}.")
    x = _check_input(x, sampling_rate, "ecg_peaks()", leads=leads == "fuse")
    if method not in ECG_PEAK_METHODS:
        raise DevicepipeError(f"ecg_peaks(): unknown method {method!r}; choose one of {sorted(ECG_PEAK_METHODS)}.")
    if leads == "fuse" and method != "ricker":
        raise DevicepipeError(f"ecg_peaks(): leads='fuse' needs method='ricker', got {method!r}.")
    find = ECG_PEAK_METHODS[method]
    accepted = _options_of(method)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise DevicepipeError(
            f"ecg_peaks(): method {method!r} has no option {unknown[0]!r}; its options are {accepted or 'none'}."
        )
    if leads == "fuse":
        many = x.ndim == 3
        with torch.inference_mode():
            rows, cols = _peaks_ricker_fused(x if many else x[None], float(sampling_rate), **options)
        per_recording = split_by_row(*_ordinary(rows, cols), x.shape[0] if many else 1)
        return per_recording if many else per_recording[0]
    with torch.inference_mode():  # no autograd bookkeeping: a tenth of a short call's time
        rows, cols = find(x.reshape(-1, x.shape[-1]), float(sampling_rate), **options)
    per_row = split_by_row(*_ordinary(rows, cols), 1 if x.ndim == 1 else x.shape[0])
    return per_row[0] if x.ndim == 1 else per_row


def _ordinary(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Copies of tensors made under ``torch.inference_mode`` that a caller may change in place."""
    return tuple(t.clone() for t in tensors)


def ecg_peaks_chunked(
    read: Callable[[int, int], torch.Tensor],
    n_samples: int,
    sampling_rate: float,
    *,
    chunk: int,
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> torch.Tensor:
    """The R peaks of a recording too long for memory, read a chunk at a time: exactly the
    peaks :func:`ecg_peaks` (``method="ricker"``) finds in one call on the whole recording.

    One pass: each chunk is filtered, and gives per-block summaries of the response (its maximum
    and mean every ``block_s``, and a sparse subsample) and its candidates (local maxima, with
    their height, sign and refined position), both small next to the signal and both written to
    temporary files (:class:`~devicepipe.io.spill.Spill`), so that memory does not grow with
    the recording. The thresholds, which depend on the whole recording, come from the summaries
    of all chunks (the envelope's median by an exact selection over parts read back); then the
    candidates above them go through the T-wave and polarity rules, which compare candidates
    across the recording, a part at a time. Chunks are read with a halo of
    samples either side (what decides a candidate: the filter, the refractory period, the
    refinement window), and start at multiples of the blocks, so each sample is computed as in
    one call.

    Parameters
    ----------
    read : ``read(start, stop)`` returns samples ``[start, stop)`` of the recording as a tensor
        of shape ``(stop - start,)``, on the device to work on.
    n_samples : the recording's length.
    sampling_rate : Hz.
    chunk : samples per chunk (rounded up to a multiple of the block alignment); the memory
        needed is a few times ``chunk`` samples, whatever the recording's length, besides the
        peaks returned (8 bytes each); the temporary files take about 50 bytes a beat.
    progress : called with ``(samples done, n_samples)`` after each chunk.
    options : the ``"ricker"`` method's settings, as :func:`ecg_peaks` takes them.

    Returns
    -------
    int64 Tensor of shape ``(n_peaks,)``, sorted, on the device ``read`` returns.
    """
    with Spill() as out:
        device = _detect_into(out, "peaks", read, n_samples, sampling_rate, chunk=chunk, progress=progress, **options)
        return out.read("peaks", device=device)


def ecg_peaks_chunked_to(
    out: Spill,
    read: Callable[[int, int], torch.Tensor],
    n_samples: int,
    sampling_rate: float,
    *,
    chunk: int,
    name: str = "peaks",
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> int:
    """:func:`ecg_peaks_chunked` with the peaks left on disk, in ``out`` under ``name`` (int64,
    sorted): nothing that grows with the recording stays in memory. Returns their number."""
    _detect_into(out, name, read, n_samples, sampling_rate, chunk=chunk, progress=progress, **options)
    return out.size(name)


def _detect_into(
    out: Spill, name: str, read: Callable[[int, int], torch.Tensor], n_samples: int, sampling_rate: float, **kw: Any
) -> torch.device:
    """The chunked detection into ``out``'s ``name``; the device ``read`` returns."""
    out.append(name, torch.zeros(0, dtype=torch.int64))  # (the name holds int64, even with no peak)
    with torch.inference_mode():  # no autograd bookkeeping
        return _peaks_chunked(read, n_samples, sampling_rate, out=(out, name), **kw)


def detection_chunk(chunk: int, sampling_rate: float, **options: Any) -> int:
    """The samples per chunk :func:`ecg_peaks_chunked` works in for ``chunk`` asked: rounded up to
    a multiple of the detector's block alignment (at least one; a few seconds), so that its
    blocks and sub-blocks fall on the same samples as in one call."""
    return _aligned(chunk, _Ricker(float(sampling_rate), **options).alignment)


def _aligned(chunk: int, step: int) -> int:
    """``chunk`` rounded up to a multiple of ``step`` (at least one)."""
    return max(step, -(-int(chunk) // step) * step)


def _peaks_chunked(
    read: Callable[[int, int], torch.Tensor],
    n_samples: int,
    sampling_rate: float,
    *,
    chunk: int,
    progress: Callable[[int, int], None] | None,
    out: tuple[Spill, str],
    **options: Any,
) -> torch.device:
    unknown = sorted(set(options) - set(_options_of("ricker")))
    if unknown:
        raise DevicepipeError(
            f"ecg_peaks_chunked(): no option {unknown[0]!r}; the options are {_options_of('ricker')}."
        )
    if n_samples < 2 * sampling_rate:
        peaks = ecg_peaks(read(0, n_samples), sampling_rate, **options)
        out[0].append(out[1], peaks)
        return peaks.device
    r = _Ricker(float(sampling_rate), **options)
    step = r.alignment
    chunk = _aligned(chunk, step)  # (as detection_chunk says)
    halo = -(-r.reach // step) * step
    edge = min(n_samples, _samples(r.edge_s, r.fs))
    means = r.edge_means(_checked(read(0, edge), sampling_rate, 0)[None], read(n_samples - edge, n_samples)[None])
    stride = r.subsample_stride(n_samples)
    starts = range(0, n_samples, chunk)
    # the same for every chunk (the rate, the samples' dtype and device); made before the first
    # chunk's buffers, as a small tensor kept among them would keep the heap in pieces
    kernel = r.kernel(means[0])
    with Spill() as spill:  # what grows with the recording waits on disk, not in memory
        # the subsample (every stride-th sample: about SUBSAMPLE values, whatever the length) filled in
        # place: a small tensor kept from every chunk would lie among the chunks' large buffers and keep
        # the heap in pieces
        subsample, counts = means[0].new_empty((1, -(-n_samples // stride))), []
        magnitude = torch.zeros((), device=means[0].device, dtype=means[0].dtype)  # over the same samples as one call
        for c0 in starts:
            c1 = min(n_samples, c0 + chunk)
            a, b = max(0, c0 - halo), min(n_samples, c1 + halo)
            x = _checked(read(a, b), sampling_rate, a)[None]
            feature, negative = r.feature(x, kernel, *means, start=a == 0, end=b == n_samples)
            core = feature[:, c0 - a : c1 - a]
            for name, summary in zip(("block_max", "block_mean"), r.summaries(core), strict=True):
                spill.append(name, summary)  # for the thresholds, which need the whole recording
            sub, at = core[:, (-c0) % stride :: stride], -(-c0 // stride)  # (at: the multiples of stride before c0)
            subsample[:, at : at + sub.shape[-1]] = sub
            taken = x[:, c0 - a : c1 - a][:, (-c0) % stride :: stride]
            if taken.numel():
                torch.maximum(magnitude, _abs_max(taken)[0], out=magnitude)
            found = _packed(r.candidates(x, feature, negative, a, (c0, c1)), r)
            for name, values in found.items():
                spill.append(name, values)
            counts.append(found["cols"].numel())
            del x, feature, negative, core, found
            if progress is not None:
                progress(c1, n_samples)
        device, dtype = means[0].device, means[0].dtype
        n_blocks = spill.size("block_max")
        reach = _samples(r.envelope_s / r.block_s, 1.0)  # the envelope's window, in blocks

        def envelope(a: int, b: int) -> torch.Tensor:
            """Blocks ``[a, b)`` of the envelope, ``(1, b - a)``, from the block maxima around them."""
            lo, hi = max(0, a - reach), min(n_blocks, b + reach)
            return r.envelope(spill.read("block_max", lo, hi, device)[None])[:, a - lo : b - lo]

        def envelope_parts() -> Iterator[torch.Tensor]:
            return (envelope(a, min(n_blocks, a + MEDIAN_PART)) for a in range(0, n_blocks, MEDIAN_PART))

        typical = lower_median_of_parts(envelope_parts).reshape(1, 1).to(device)
        no_ecg = r.no_ecg(typical, subsample, magnitude.reshape(1))
        del subsample
        first, around = 0, r.threshold_reach
        # each candidate's test is its own, its block's thresholds local: a stretch of chunks at a time
        # (at least THRESHOLD_BLOCKS blocks: the summaries and candidates, not the samples, are read)
        per = max(1, THRESHOLD_BLOCKS * r.block // chunk)
        for g in range(0, len(starts), per):
            c0, count = starts[g], sum(counts[g : g + per])
            b0, b1 = c0 // r.block, -(-min(n_samples, c0 + per * chunk) // r.block)
            a, b = max(0, b0 - around), min(n_blocks, b1 + around)
            limits = r.local_thresholds(envelope(a, b), spill.read("block_mean", a, b, device)[None], typical, no_ecg)
            found = {key: spill.read(key, first, first + count, device) for key in _PACKED_KEYS}
            first += count
            for name, values in r.accept(found, *limits, first_block=a).items():
                spill.append("kept_" + name, values)
        _select_in_parts(r, _Held(spill, "kept_", device, dtype), n_samples, SELECT_BLOCK, out)
    return device


#: Values a chunked detection reads back from disk at a time for a median over the recording.
MEDIAN_PART = 1 << 16

#: Blocks a chunked detection's second pass (the thresholds and the candidates' tests) takes at
#: least at a time: several small chunks together (their summaries and candidates, a few bytes a
#: block and a candidate), so that a pass of a few small operators is not made for every chunk.
THRESHOLD_BLOCKS = 1 << 15


#: What :func:`_packed` holds of each candidate; and after :meth:`_Ricker.accept`.
_PACKED_KEYS = ("cols", "height", "shift", "sign")
_HELD_KEYS = (*_PACKED_KEYS, "level", "strong")


@dataclass(frozen=True)
class _Held:
    """One row's candidates as :func:`_packed` holds them, after :meth:`_Ricker.accept`, on disk:
    the names with ``prefix`` in ``spill``; read back a part at a time onto ``device``."""

    spill: Spill
    prefix: str
    device: torch.device
    dtype: torch.dtype  # the feature's (heights and levels)

    @property
    def n(self) -> int:
        return self.spill.size(self.prefix + "cols")

    def part(self, a: int, b: int, keys: tuple[str, ...] = _HELD_KEYS) -> dict[str, torch.Tensor]:
        """Candidates ``[a, b)``: a dict of ``(b - a,)`` tensors."""
        return {k: self.spill.read(self.prefix + k, a, b, self.device) for k in keys}

    def col(self, i: int) -> int:
        return int(self.spill.read(self.prefix + "cols", i, i + 1)[0])


def _select_in_parts(r: _Ricker, held: _Held, total: int, block: int, out: tuple[Spill, str]) -> None:
    """The peaks of :meth:`_Ricker.select` on one row's candidates ``held`` (``(n_peaks,)``,
    sorted), ``block`` candidates at a time, so that its memory does not grow with the recording.

    The polarity rule's figures come from the whole recording first (:meth:`_Ricker.polarity_of`).
    Each part then goes through the rules with candidates either side, and keeps the beats
    whose columns lie in its own stretch. The T-wave rule looks one beat back, and the
    search-back's decisions reach at most :data:`SELECT_HALO_BEATS` beats in from a part's edge
    (see its note), so the side candidates are widened until each side holds that many beats.
    The peaks go to ``out`` (a :class:`Spill` and a name), joined (:func:`_joined`).
    """
    n = held.n
    if n <= block:
        out[0].append(out[1], r.select(_unpacked(held.part(0, n)), 1, total)[1])
        return
    polarity = r.polarity_of(held, block)

    def parts() -> Iterator[torch.Tensor]:
        for s in range(0, n, block):
            e = min(n, s + block)
            lo = held.col(s) if s > 0 else -1
            hi = held.col(e) if e < n else total
            halo = max(1, block // 4)
            while True:
                a, b = max(0, s - halo), min(n, e + halo)
                _, cols, refined, plain = r.beats(_unpacked(held.part(a, b)), 1, total, polarity)
                left_ok = a == 0 or int((plain < lo).sum()) >= SELECT_HALO_BEATS
                right_ok = b == n or int((plain >= hi).sum()) >= SELECT_HALO_BEATS
                if left_ok and right_ok:
                    break
                halo *= 2
            yield torch.unique(refined[(cols >= lo) & (cols < hi)])

    _joined(parts(), *out, seam=2 * _samples(r.refine_s, r.fs) + 2)


def _joined(parts: Iterable[torch.Tensor], spill: Spill, name: str, *, seam: int) -> None:
    """The ``parts`` (each sorted and unique, int64 ``(k,)``) appended to ``spill``'s ``name`` as
    ``torch.unique`` of all of them would give them. Parts follow each other in order but near
    their seams: a value may lie up to ``seam`` samples after values of the next part (a refined
    position moved over the seam), or repeat one there. So the last ``seam`` values wait, merged
    with the next part, before they are written (at most ``seam`` distinct values can be out of
    order)."""
    held = None
    last = None  # the last value written
    for part in parts:
        if held is None:
            held = part
        elif part.numel():
            disordered = held.numel() and int(part[0]) <= int(held[-1])
            held = torch.unique(torch.cat([held, part])) if disordered else torch.cat([held, part])
        if held.numel() > seam:
            done, held = held[:-seam], held[-seam:]
            _check_order(done, last)
            spill.append(name, done)
            last = int(done[-1])
    if held is not None and held.numel():
        _check_order(held, last)
        spill.append(name, held)


def _check_order(values: torch.Tensor, last: int | None) -> None:
    if last is not None and int(values[0]) <= last:
        raise RuntimeError("_joined(): a part reaches further back than its seam allows.")


def _packed(c: dict[str, torch.Tensor], r: _Ricker) -> dict[str, torch.Tensor]:
    """One row's candidates (:meth:`_Ricker.candidates`, :meth:`_Ricker.accept`) held compactly
    while a chunked detection gathers those of the whole recording: no row numbers (all 0),
    the refined position as its shift from the column (within the refinement window), the
    sign as int8: 15 bytes a candidate where the plain form takes 32. :func:`_unpacked` undoes it."""
    shift_type = torch.int16 if _samples(r.refine_s, r.fs) < 2**15 else torch.int32
    out = {k: v for k, v in c.items() if k not in ("rows", "refined", "sign")}
    out["shift"] = (c["refined"] - c["cols"]).to(shift_type)
    out["sign"] = c["sign"].to(torch.int8)
    return out


def _unpacked(p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The candidates :func:`_packed` holds, in the plain form the rules take."""
    out = {k: v for k, v in p.items() if k not in ("shift", "sign")}
    out["rows"] = torch.zeros_like(p["cols"])
    out["sign"] = p["sign"].to(p["height"].dtype)
    out["refined"] = p["cols"] + p["shift"]
    return out


def _checked(x: torch.Tensor, sampling_rate: float, offset: int) -> torch.Tensor:
    """One chunk as the detector takes it; a non-finite sample is named by its place in the recording."""
    if x.ndim != 1:
        raise DevicepipeError(f"ecg_peaks_chunked(): read() must return shape (time,), got {tuple(x.shape)}.")
    x = x.detach() if x.dtype.is_floating_point else x.detach().to(torch.float32)
    if not all_finite(x):
        first = offset + int(torch.nonzero(~torch.isfinite(x))[0])
        raise DevicepipeError(
            f"the recording holds a non-finite value (NaN or inf) at sample {first:,}; chunked detection needs "
            "finite samples (interpolate them first, or detect in one piece with nan='interpolate')."
        )
    return x


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
        return int(torch.count_nonzero(self.kept)) / self.kept.numel() if self.kept.numel() else 0.0

    @property
    def width(self) -> int:
        """Samples per row."""
        return int(self.matrix.shape[-1])

    @property
    def window_s(self) -> float:
        """Seconds of signal a full row spans (a row resampled to ``w`` samples has a rate of ``w / window_s``)."""
        return self.width / self.sampling_rate


#: A beat (or a stretch's median beat) correlating under this with the recording's typical beat
#: is marked poor: under 0.5, less than a quarter of its variance follows the typical shape.
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
    if corr.numel() == 0:
        return BeatQuality(corr, corr, window_s)
    stretch_of = torch.div(beats.peaks.to(corr.device), _samples(window_s, beats.sampling_rate), rounding_mode="floor")
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
    window = _samples(window_s, sampling_rate)

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
    return _stretch_medians_of(parts, _samples(window_s, sampling_rate), n_samples, like)


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
    return unusable_stretches(medians, _samples(window_s, sampling_rate), n_samples, min_quality)


def stretch_medians(quality: BeatQuality, peaks: torch.Tensor, n_samples: int, sampling_rate: float) -> torch.Tensor:
    """The (lower) median beat quality of each ``quality.window_s`` stretch of a recording of
    ``n_samples`` samples (stretches from sample 0, the last one possibly shorter), as
    ``quality.stretch`` holds it for each beat: ``(ceil(n_samples / window),)``, NaN for a
    stretch holding no cut beat. ``peaks`` are the R peaks of the cut beats, ``(n_kept,)``, one
    per value of ``quality.stretch``."""
    parts = [(peaks.to(quality.stretch.device), quality.stretch)]
    return _stretch_medians_of(parts, _samples(quality.window_s, sampling_rate), n_samples, quality.stretch)


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
    return unusable_stretches(medians, _samples(quality.window_s, sampling_rate), n_samples, min_quality)


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
    geometry = dict(before_s=before_s, after_s=after_s, lead_s=lead_s, lower_s=lower_s, upper_s=upper_s)
    if mode in SEGMENT_MODES:
        kept, lengths = _kept(peaks, n, fs, mode, **geometry)
    if mode == "centered":
        before, after = _samples(before_s, fs, 0), _samples(after_s, fs, 0)
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
        matrix, _ = segment_between(x, starts[kept], lengths[kept], width=width)
        return Beats(matrix, lengths[kept], peaks[kept], starts[kept], kept, fs, mode, lead, (lower, upper))
    raise DevicepipeError(f"ecg_segment(): unknown mode {mode!r}; use one of {list(SEGMENT_MODES)}.")


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
        before, after = _samples(before_s, fs, 0), _samples(after_s, fs, 0)
        return (peaks - before >= 0) & (peaks + after <= n_samples), torch.full_like(peaks, before + after)
    lead = _samples(lead_s, fs, 0)
    lower, upper = _samples(lower_s, fs), _samples(upper_s, fs)
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
    mode: Literal["centered", "seed"] = "centered",
    **options: Any,
) -> Iterator[tuple[torch.Tensor, Beats]]:
    """:func:`ecg_segment` of a recording read a chunk at a time (``read(start, stop)`` as for
    :func:`ecg_peaks_chunked`): yields, chunk by chunk, the positions in ``peaks`` of the peaks
    that fall in it (int64 ``(k,)``) and their :class:`Beats`, whose rows, stacked in order, are
    the matrix of one call on the whole recording; ``kept`` and the positions are the
    recording's. ``peaks`` are sorted: a tensor, or peaks held on disk
    (:class:`~devicepipe.io.spill.Stored`), read a chunk's worth at a time. Each chunk is cut
    with a halo longer than any beat, so a beat across a chunk border is cut whole."""
    fs = float(sampling_rate)
    if isinstance(peaks, torch.Tensor):
        peaks = torch.as_tensor(peaks, dtype=torch.int64)
    halo = 2 * max(
        _samples(options.get("upper_s", 1.024), fs),
        _samples(options.get("before_s", 0.25) + options.get("after_s", 0.45), fs),
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


#: The beat classes of ANSI/AAMI EC57 and the MIT-BIH annotation symbols each gathers: normal and
#: bundle-branch-block beats (N), supraventricular ectopic (S), ventricular ectopic (V), fusion (F),
#: paced and unclassifiable (Q).
AAMI_CLASSES = {"N": "NLRej", "S": "AaJS", "V": "VE", "F": "F", "Q": "/fQ"}


def aami_class(symbol: str) -> str | None:
    """The AAMI class (``"N"``, ``"S"``, ``"V"``, ``"F"``, ``"Q"``) of a MIT-BIH beat symbol, None for
    a symbol that is not a beat of any class (``""``, rhythm or noise annotations)."""
    for name, symbols in AAMI_CLASSES.items():
        if symbol and symbol in symbols:
            return name
    return None


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
