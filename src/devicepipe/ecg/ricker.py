"""The default R-peak detector, ``method="ricker"`` (see :mod:`devicepipe.ecg`): the Ricker wavelet
filter, candidates, the adaptive threshold, the T-wave rule, polarity and search-back, on one lead
or fused over several. The R-peak kernel: long and dense by design."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from devicepipe.core.spill import Spill
from devicepipe.ecg.spikes import SPIKE_PASSES, without_spikes
from devicepipe.signal.blocks import (
    block_reduce,
    centred_window,
    lower_median_of_parts,
    neighbour_median,
    row_median,
)
from devicepipe.signal.filters import TOEPLITZ_BLOCK, centred_convolve
from devicepipe.signal.peaks import peak_mask
from devicepipe.signal.wavelets import ricker

MATCH_TOLERANCE_S = 0.15
#: Beats this close (s) to either end of a recording are not scored against a reference.
EDGE_S = 0.5

SEED_RATE_HZ = 250.0
#: The response's median (the contrast's denominator) is judged on about this many of its samples,
#: evenly spaced.
SUBSAMPLE = 200_000  # the notebook's recording (UCR "ECG one day") is sampled at 250 Hz
#: Beat intervals (s) at which a row of low contrast is looked at for a rhythm (:meth:`Ricker.dense`):
#: 300 to 120 bpm. A slower rhythm leaves quiet stretches between its beats (its contrast is high);
#: a slow repeating signal of low contrast is not an ECG's (a pulse wave, a smooth sine).
DENSE_LAGS_S = (0.2, 0.5)
#: The response's autocorrelation at its beat interval at or above which a row of low contrast
#: holds a fast, wide-complex rhythm, not noise (Gaussian noise, white, pink or brown, gives under
#: 0.1; ventricular tachycardia at 200-250 bpm 0.85-0.92; see :meth:`Ricker.dense`).
DENSE_CORR = 0.6
#: The candidates' heights within +-envelope_s/2 of a block, each signed by its polarity, summed,
#: over their plain sum, at or above which that stretch's candidates are one rhythm's beats (see
#: :meth:`Ricker.local_thresholds`): noise's polarity is either, as often one as the other.
ONE_SIGN = 0.8
#: A typical QRS response at or under this fraction of the signal's magnitude is float rounding
#: of a constant (a flat or saturated lead), not a heart: the filter's rounding error is about
#: 1e-6 of the magnitude, an ECG's QRS response a sizeable fraction of its amplitude.
ROUNDING = 1e-5


def samples(seconds: float, sampling_rate: float, minimum: int = 1) -> int:
    return max(minimum, int(round(seconds * sampling_rate)))


# ----------------------------------------------------------------------------- default method


@dataclass(frozen=True)
class Ricker:
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
    spike_ms: float = 10.0
    searchback_rr: float = 1.66
    searchback_ratio: float = 0.5
    edge_s: float = 1.0  # the level the filter assumes past either end: the mean of this first/last stretch

    @property
    def block(self) -> int:
        return samples(self.block_s, self.fs)

    @property
    def sub(self) -> int:
        return samples(0.016, self.fs)

    @property
    def refractory(self) -> int:
        return samples(self.refractory_s, self.fs, 2)

    @property
    def taps(self) -> int:
        """The filter's length in samples: the Ricker wavelet over +-4 of its widths."""
        return 2 * math.ceil(4 * self.sigma_s * self.fs) + 1

    def kernel(self, like: torch.Tensor) -> torch.Tensor:
        kernel = ricker(self.taps, self.sigma_s * self.fs, dtype=torch.float64)
        return (kernel - kernel.mean()).to(device=like.device, dtype=like.dtype)  # zero-sum: blind to any offset

    def hides_beats(
        self,
        height: torch.Tensor,
        limits: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        rows: torch.Tensor | int,
        blocks: torch.Tensor,
    ) -> torch.Tensor:
        """Which spikes (their response ``height`` in the filter, in ``blocks`` of ``rows``) stand
        over the lowest threshold a beat passes there (the search-back's, else the block's): a
        beat beside such a spike, lower in the filter, lost its place as a candidate to it. A
        blip of noise under it hides nothing a beat could not pass."""
        per_block, _, secondary = limits
        lowest = secondary if self.searchback_rr > 0 else per_block
        return height > lowest[rows, blocks]

    @property
    def spike_window(self) -> int:
        """Samples either side of a candidate's extremum its width at half height is measured in
        (:data:`SPIKE_WINDOW_S`; 0: the spike rule is off)."""
        return samples(SPIKE_WINDOW_S, self.fs) if self.spike_ms > 0 else 0

    @property
    def reach(self) -> int:
        """Samples either side of a stretch that decide its candidates: the filter, the
        refractory period, the sub-blocks and the refinement window."""
        return self.taps + self.refractory + 2 * self.sub + samples(self.refine_s, self.fs) + 2

    @property
    def alignment(self) -> int:
        """Chunks start at multiples of this (blocks, sub-blocks and the convolution's 32-sample
        rows, :data:`~devicepipe.signal.filters.TOEPLITZ_BLOCK`, then fall on the same samples as in
        one call)."""
        return math.lcm(self.block, self.sub, TOEPLITZ_BLOCK)

    def edge_means(self, head: torch.Tensor, tail: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean of the first and of the last ``edge_s`` of each row (``(batch, 1)`` each),
        from ``head``/``tail``: at least that stretch from each end."""
        m = min(samples(self.edge_s, self.fs), head.shape[-1], tail.shape[-1])
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
        stride: int = 1,
        negative: torch.Tensor | None = None,
        signs: tuple[torch.Tensor, torch.Tensor] | Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None,
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
        found = self.typical_level(envelope, subsample, magnitude, stride, negative)
        return self.local_thresholds(envelope, block_mean, *found, signs)

    @property
    def threshold_reach(self) -> int:
        """Blocks either side of a stretch of blocks that decide its :meth:`local_thresholds`."""
        span = samples(self.envelope_s / self.block_s, 1.0)
        return span + samples(self.level_s / self.block_s, 1.0) + 2

    def envelope(self, block_max: torch.Tensor) -> torch.Tensor:
        """The strongest block maximum within +-envelope_s/2 of each block, ``(batch, blocks)``."""
        return centred_window(block_max, samples(self.envelope_s / self.block_s, 1.0), "max")

    def typical_level(
        self,
        envelope: torch.Tensor,
        subsample: torch.Tensor,
        magnitude: torch.Tensor | None = None,
        stride: int = 1,
        negative: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """What :meth:`thresholds` takes from the whole recording's :meth:`envelope`: each row's
        typical QRS response (the envelope's median, ``(batch, 1)``), whether the row holds no
        ECG and whether its beats leave no quiet stretch (``(batch,)`` bool each, :meth:`no_ecg`)."""
        typical = envelope.median(-1, keepdim=True).values
        return typical, *self.no_ecg(typical, subsample, magnitude, stride, negative)

    def no_ecg(
        self,
        typical: torch.Tensor,
        subsample: torch.Tensor,
        magnitude: torch.Tensor | None = None,
        stride: int = 1,
        negative: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Whether each row holds no ECG, and whether it is dense (``(batch,)`` bool each), from its
        typical QRS response ``typical`` (``(batch, 1)``, :meth:`typical_level`), a subsample of
        its feature (every ``stride``-th sample; ``negative``: where the response there is
        negative, None: taken as never) and the signal's size ``magnitude`` (see
        :meth:`thresholds`). A row of low contrast whose response repeats at a beat's interval
        (:meth:`dense`) holds an ECG: a fast rhythm of wide beats (ventricular tachycardia over
        180 bpm) leaves the response no quiet stretch, so its median is high, as noise's is."""
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
        flat = typical.squeeze(-1) <= 0
        if magnitude is not None:  # (batch,): the signal's size, to tell a response from rounding
            flat |= typical.squeeze(-1) <= ROUNDING * magnitude
        low = (below <= (subsample.shape[-1] - 1) // 2) & ~flat
        dense = torch.zeros_like(low)
        if bool(low.any()):  # (seldom: noise, or such a rhythm)
            at = torch.nonzero(low).squeeze(1)
            signed = subsample[at] if negative is None else torch.where(negative[at], -subsample[at], subsample[at])
            dense[at] = self.dense(subsample[at], signed, stride)
        return (low & ~dense) | flat, dense

    def dense(self, feature: torch.Tensor, signed: torch.Tensor, stride: int = 1) -> torch.Tensor:
        """Whether each row's ``feature`` (a subsample, every ``stride``-th sample, ``(rows, k)``;
        ``signed``: the response there, with its sign) repeats at a beat's interval, ``(rows,)``
        bool: the feature's autocorrelation peaks over :data:`DENSE_CORR` at a lag within
        :data:`DENSE_LAGS_S` (the first lag near the highest), is below zero at half that lag,
        and the signed response's is over :data:`DENSE_CORR` at it too. Noise has no such peak; a
        hum or a sine, whose feature repeats at every half of its period, fails one of the last
        two (high at the half lag, or of the other sign at it). A subsample too sparse to see a
        beat's interval (a recording of many hours) says no."""
        dt = stride / self.fs
        k = feature.shape[-1]
        lo, hi = math.ceil(DENSE_LAGS_S[0] / dt), min(k // 2, math.floor(DENSE_LAGS_S[1] / dt))
        if dt > DENSE_LAGS_S[0] / 4 or hi <= lo:
            return torch.zeros(feature.shape[0], dtype=torch.bool, device=feature.device)
        acf, acf_signed = _autocorrelation(feature, hi), _autocorrelation(signed, hi)
        band = acf[:, lo:]
        first = (band >= 0.9 * band.amax(1, keepdim=True)).to(torch.int8).argmax(1) + lo
        at = acf.gather(1, first[:, None]).squeeze(1)
        half = acf.gather(1, torch.div(first, 2, rounding_mode="floor")[:, None]).squeeze(1)
        same_sign = acf_signed.gather(1, first[:, None]).squeeze(1)
        return (at >= DENSE_CORR) & (half < 0) & (same_sign >= DENSE_CORR)

    def local_thresholds(
        self,
        envelope: torch.Tensor,
        block_mean: torch.Tensor,
        typical: torch.Tensor,
        no_ecg: torch.Tensor,
        dense: torch.Tensor | None = None,
        signs: tuple[torch.Tensor, torch.Tensor] | Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`thresholds` from the :meth:`envelope`, the block means and :meth:`typical_level`'s
        answer. Each block's values depend on the block summaries :attr:`threshold_reach` blocks
        either side, so a stretch of blocks with that many more on each side (or the recording's
        end) gives the stretch's values of the whole recording. A ``dense`` row's floor leaves out
        the noise: its quietest half-second is its beats'. So does a block's where the noise
        floor is over the beat threshold while the candidates around it are of one polarity
        (``signs``, :meth:`block_signs`, or a function giving them, called only where a floor is
        that high; at least :data:`ONE_SIGN`): beats too close for a quiet
        half-second between them (ventricular tachycardia over 200 bpm), where noise's
        candidates point either way."""
        span = samples(self.envelope_s / self.block_s, 1.0)
        level = centred_window(envelope, samples(self.level_s / self.block_s, 1.0), "min")
        noise = centred_window(block_mean, span, "min")
        if dense is not None and bool(dense.any()):
            noise = torch.where(dense[:, None], torch.zeros_like(noise), noise)
        busy = self.noise_factor * noise >= 2 * self.threshold * level  # (the floor near the beats themselves)
        if signs is not None and bool(busy.any()):  # (seldom: the polarity is read only where it is)
            signed, heights = (centred_window(v, span, "mean") for v in (signs() if callable(signs) else signs))
            one_rhythm = (signed.abs() >= ONE_SIGN * heights) & (heights > 0)
            noise = torch.where(one_rhythm & busy, torch.zeros_like(noise), noise)
        floor = torch.maximum(self.global_floor * typical, self.noise_factor * noise)
        per_block = torch.maximum(self.threshold * level, floor)
        per_block = torch.clamp(per_block, min=float(torch.finfo(envelope.dtype).tiny))
        per_block[no_ecg] = torch.inf
        return per_block, level, torch.maximum(self.searchback_ratio * per_block, floor)

    def block_signs(
        self, c: dict[str, torch.Tensor], n_rows: int, n_blocks: int, first_block: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The :meth:`candidates` ``c`` of blocks ``first_block ...`` summed per block: their
        heights signed by their polarity, and plain, ``(n_rows, n_blocks)`` each (float64: the
        same sums in one call and in chunks), for :meth:`local_thresholds`."""
        at = c["rows"] * n_blocks + (c["cols"] // self.block - first_block)
        height = c["height"].double()
        zeros = torch.zeros(n_rows * n_blocks, dtype=torch.float64, device=height.device)
        signed = zeros.clone().index_add_(0, at, height * c["sign"].double())
        return signed.reshape(n_rows, n_blocks).to(c["height"].dtype), zeros.index_add_(0, at, height).reshape(
            n_rows, n_blocks
        ).to(c["height"].dtype)

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
        refined, wide = _refined(x, sign, rows, cols, samples(self.refine_s, self.fs), self.spike_window)
        height = feature[rows, cols]
        if wide is not None:  # a spike is no beat: it passes no threshold
            height = torch.where(wide * (1000.0 / self.fs) < self.spike_ms, torch.zeros_like(height), height)
        return {"rows": rows, "cols": cols + offset, "height": height, "sign": sign, "refined": refined + offset}

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
            return _weak_followers(rows, cols, height, level, samples(self.close_s, self.fs), self.close_ratio)
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
            # only where a T wave may lie: within close_s of the candidate before (a T wave often
            # points against its QRS); later, a deflection of the other sign is a beat on its own
            # (ventricular beats often point the other way)
            soon = torch.zeros_like(keep)
            soon[1:] = (rows[1:] == rows[:-1]) & (cols[1:] - cols[:-1] <= samples(self.close_s, self.fs))
            keep |= ~soon
            taken, left = _positions(keep)
            if self.searchback_rr > 0:  # the others are weak evidence: beats only where the rhythm wants one
                both = [torch.cat([w, v[left]]) for w, v in zip(weak, (rows, cols, refined, height), strict=True)]
                order = torch.argsort(both[0] * total + both[1])
                weak = tuple(v[order] for v in both)
            rows, cols, refined = rows[taken], cols[taken], refined[taken]
        plain = cols
        if self.searchback_rr > 0 and weak[0].numel():
            clearance = (samples(self.close_s, self.fs), self.refractory)
            rows, cols, refined = _search_back((rows, cols, refined), weak, total, self.searchback_rr, clearance)
        return rows, cols, refined, plain

    def polarity_of(self, held: Held, block: int) -> tuple[torch.Tensor, torch.Tensor]:
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


def _autocorrelation(rows: torch.Tensor, lags: int) -> torch.Tensor:
    """Each row's autocorrelation at lags ``0 ... lags`` (its mean removed; unbiased: each lag's
    sum over its own number of products; 1 at lag 0), ``(rows, lags + 1)`` float64."""
    k = rows.shape[-1]
    x = rows.double() - rows.double().mean(-1, keepdim=True)
    power = torch.fft.rfft(x, n=2 * k).abs().square_()
    acf = torch.fft.irfft(power, n=2 * k)[:, : lags + 1]
    scale = k / (k - torch.arange(lags + 1, device=x.device))
    return acf / acf[:, :1].clamp_min(torch.finfo(acf.dtype).tiny) * scale


#: Half the window (s) in which a candidate's width at half its height is measured.
SPIKE_WINDOW_S = 0.02


def abs_max(x: torch.Tensor) -> torch.Tensor:
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


def peaks_ricker(x: torch.Tensor, sampling_rate: float, **options: float) -> tuple[torch.Tensor, torch.Tensor]:
    """R peaks of each row of ``x`` (shape ``(batch, time)``): their rows and columns, sorted."""
    per_group = max(1, BATCH_GROUP_SAMPLES * torch.get_num_threads() // x.shape[-1])
    if x.device.type != "cpu" or x.shape[0] <= per_group:
        return _peaks_ricker_rows(x, sampling_rate, **options)
    found = [_peaks_ricker_rows(part, sampling_rate, **options) for part in x.split(per_group)]
    rows = torch.cat([part_rows + i * per_group for i, (part_rows, _) in enumerate(found)])
    return rows, torch.cat([cols for _, cols in found])


def _peaks_ricker_rows(x: torch.Tensor, sampling_rate: float, **options: float) -> tuple[torch.Tensor, torch.Tensor]:
    r = Ricker(float(sampling_rate), **options)
    spike = r.spike_window
    for passes in range(SPIKE_PASSES, 0, -1):
        found, spikes = _peaks_and_spikes(r, x)
        if not spike or passes == 1 or not spikes[0].numel():
            return found
        x = without_spikes(x, *spikes, spike)  # each spike's samples out, and again
    raise AssertionError("unreachable")


def _peaks_and_spikes(
    r: Ricker, x: torch.Tensor
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The peaks of rows ``x`` and the spikes among their candidates (rows, refined columns and
    polarity: candidates the spike rule took for no beat, :meth:`Ricker.candidates`)."""
    n = x.shape[-1]
    means, kernel = r.edge_means(x, x), r.kernel(x)
    feature, negative = r.feature(x, kernel, *means, start=True, end=True)
    stride = r.subsample_stride(n)
    magnitude = abs_max(x[..., ::stride])
    block_max, block_mean = r.summaries(feature)
    cands = r.candidates(x, feature, negative, 0, (0, n))

    def signs() -> tuple[torch.Tensor, torch.Tensor]:  # (summed only where a block needs them)
        return r.block_signs(cands, x.shape[0], block_max.shape[-1])

    sub, sub_negative = feature[..., ::stride], negative[..., ::stride]
    limits = r.thresholds(block_max, block_mean, sub, magnitude, stride, sub_negative, signs)
    spiky = torch.nonzero(cands["height"] == 0).squeeze(1) if r.spike_window else cands["height"][:0].long()
    rows, cols = cands["rows"][spiky], cands["cols"][spiky]
    hiding = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
    hiding[rows[r.hides_beats(feature[rows, cols], limits, rows, cols // r.block)]] = True
    spiky = spiky[hiding[rows]]  # (each row's own: a row is detected as it is alone)
    spikes = (cands["rows"][spiky], cands["refined"][spiky], cands["sign"][spiky])
    cands = r.accept(cands, *limits)
    return r.select(cands, x.shape[0], n), spikes


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


def _search_back(
    beats: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    weak: Sequence[torch.Tensor],
    total: int,
    rr_limit: float,
    clearance: tuple[int, int],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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
        rows, cols = torch.nonzero(peak_mask(feature, min_distance=min_distance), as_tuple=True)
        return rows, cols
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
    x: torch.Tensor, polarity: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, reach: int, spike: int = 0
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Each candidate moved to the extremum of ``x`` within ``reach`` samples, in the filter's
    ``polarity`` (+1 or -1 per candidate): the new columns, ``(n,)``; and, with ``spike``
    samples, how many samples within ``spike`` of that extremum (inside the same window) stand
    above the halfway point between their lowest value and it: the deflection's width at half
    its height, in samples (``(n,)``; None without ``spike``). A QRS's main deflection lasts 20 ms
    or more at half height, even a narrow one; a spike (a pacemaker's stimulus, an electrical or
    digital glitch) one or two samples."""
    if rows.numel() == 0:
        return cols, (torch.zeros_like(cols) if spike else None)
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
    if not spike:
        return refined, None
    near = (best[:, None] + torch.arange(-spike, spike + 1, device=x.device)).clamp(0, width - 1)
    around = window.gather(1, near) * polarity[:, None]
    peak = around[:, spike : spike + 1]  # (the extremum itself: the clamp never moves the centre)
    above = (around >= (peak + around.amin(1, keepdim=True)) / 2).sum(1)
    return refined, above


def ordinary(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Copies of tensors made under ``torch.inference_mode`` that a caller may change in place."""
    return tuple(t.clone() for t in tensors)


#: Values a chunked detection reads back from disk at a time for a median over the recording.
MEDIAN_PART = 1 << 16


#: What :func:`_packed` holds of each candidate; and after :meth:`Ricker.accept`.
PACKED_KEYS = ("cols", "height", "shift", "sign")
_HELD_KEYS = (*PACKED_KEYS, "level", "strong")


@dataclass(frozen=True)
class Held:
    """One row's candidates as :func:`_packed` holds them, after :meth:`Ricker.accept`, on disk:
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
