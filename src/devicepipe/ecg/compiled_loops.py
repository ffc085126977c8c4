"""The loops of the compiled ``"ricker"`` detector (see :mod:`devicepipe.ecg.compiled`), one row
at a time: :func:`detect`. Compiled by Numba on first use and cached on disk beside this file
(or in Numba's user cache where that is not writable)."""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from devicepipe.ecg.ricker import RR_NEIGHBOURS, SEARCH_BACK_PASSES

__all__ = ["detect", "ricker_taps"]

_F32 = np.float32
_TINY = np.float32(np.finfo(np.float32).tiny)
#: Outputs of the filter computed together, every tap over them in turn (16 KiB of float32).
_TILE = 4096


@nb.njit(cache=True, nogil=True)
def ricker_taps(width: float, points: int) -> np.ndarray:
    """The zero-sum Ricker wavelet of ``points`` taps and width ``width`` samples, float32, as
    :meth:`~devicepipe.ecg.ricker.Ricker.kernel` makes it (in float64, its mean taken off, then
    rounded): ``A (1 - (t/width)^2) exp(-(t/width)^2 / 2)``, ``A = 2 / (sqrt(3 width) pi^(1/4))``."""
    amplitude = 2 / (math.sqrt(3 * width) * math.pi**0.25)
    out = np.empty(points, np.float64)
    for i in range(points):
        tsq = ((i - (points - 1) / 2) / width) ** 2
        out[i] = amplitude * (1 - tsq) * math.exp(-tsq / 2)
    return (out - out.mean()).astype(np.float32)


@nb.njit(cache=True, nogil=True, fastmath={"reassoc", "nsz"})
def _mean64(x: np.ndarray, a: int, b: int) -> np.float32:
    """The mean of ``x[a:b]``, summed in float64 (in any order: the float32 mean is the same but
    for a tie at the last bit, as torch's summation order is its own)."""
    s = 0.0
    for i in range(a, b):
        s += x[i]
    return _F32(s / (b - a))


@nb.njit(cache=True, nogil=True, fastmath={"nnan", "ninf", "nsz"})
def _abs_max(x: np.ndarray) -> np.float32:
    """The largest magnitude in ``x`` (no NaN)."""
    best = _F32(0.0)
    for i in range(x.shape[0]):
        best = max(best, abs(x[i]))
    return best


@nb.njit(cache=True, nogil=True, fastmath={"nnan", "ninf", "nsz"})
def _block_max(x: np.ndarray, block: int) -> np.ndarray:
    """The maximum of each block of ``block`` samples of ``x`` (no NaN), the last one partial."""
    n = x.shape[0]
    whole = n // block
    out = np.empty((n + block - 1) // block, np.float32)
    if block <= 16:  # short blocks: a pass per position in the block, across the blocks (no chain)
        for b in range(whole):
            out[b] = x[b * block]
        for t in range(1, block):
            for b in range(whole):
                out[b] = max(out[b], x[b * block + t])
    else:
        for b in range(whole):
            best = x[b * block]
            for i in range(b * block + 1, (b + 1) * block):
                best = max(best, x[i])
            out[b] = best
    if whole < out.shape[0]:  # the last, partial block
        best = x[whole * block]
        for i in range(whole * block + 1, n):
            best = max(best, x[i])
        out[whole] = best
    return out


@nb.njit(cache=True, nogil=True)
def _convolve_same(x: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``out[i] = sum_j h[j] * x[i + lead - j]`` over the taps on the signal (``lead = (k - 1) // 2``),
    each output's products added in tap order, float32: four taps to a pass over a tile of
    outputs (the same sums as one tap to a pass, with a quarter of the loads and stores)."""
    n, k = x.shape[0], h.shape[0]
    lead = (k - 1) // 2
    out = np.zeros(n, np.float32)
    inner_a, inner_b = lead, n - (k - 1 - lead)  # where every tap lies on the signal
    for first in range(0, n, _TILE):
        last = min(n, first + _TILE)
        a, b = max(first, inner_a), min(last, inner_b)
        if a < b:
            o = out[a:b]
            j = 0
            while j + 4 <= k:
                h0, h1, h2, h3 = h[j], h[j + 1], h[j + 2], h[j + 3]
                v0 = x[a + lead - j : b + lead - j]
                v1 = x[a + lead - j - 1 : b + lead - j - 1]
                v2 = x[a + lead - j - 2 : b + lead - j - 2]
                v3 = x[a + lead - j - 3 : b + lead - j - 3]
                for i in range(b - a):
                    t = o[i] + h0 * v0[i]
                    t = t + h1 * v1[i]
                    t = t + h2 * v2[i]
                    o[i] = t + h3 * v3[i]
                j += 4
            while j < k:
                hj = h[j]
                v = x[a + lead - j : b + lead - j]
                for i in range(b - a):
                    o[i] += hj * v[i]
                j += 1
    for end in range(2):  # the outputs whose taps hang past an end: those taps left out
        lo, hi = (0, min(n, inner_a)) if end == 0 else (max(inner_a, inner_b), n)
        for i in range(lo, hi):
            t = _F32(0.0)
            for j in range(k):
                at = i + lead - j
                if 0 <= at < n:
                    t += h[j] * x[at]
            out[i] = t
    return out


@nb.njit(cache=True, nogil=True)
def _filter(x: np.ndarray, h: np.ndarray, head_mean: np.float32, tail_mean: np.float32) -> np.ndarray:
    """The Ricker response, as ``centred_convolve`` gives it: a "same" convolution of ``x`` with
    ``h``, the first and last ``k`` outputs corrected for the level past either end."""
    n, k = x.shape[0], h.shape[0]
    lead = (k - 1) // 2
    out = _convolve_same(x, h)
    ends = np.empty(k, np.float32)  # torch.cumsum accumulates float32 in float64 on the CPU
    acc = 0.0
    for j in range(k):
        acc += h[j]
        ends[j] = acc
    for i in range(k):
        out[i] -= head_mean * ends[min(i + lead, k - 1)]
        before = ends[i - (k - lead)] if i >= k - lead else _F32(0.0)
        out[n - k + i] -= tail_mean * (ends[k - 1] - before)
    return out


@nb.njit(cache=True, nogil=True)
def _centred(v: np.ndarray, window: int, how: int) -> np.ndarray:
    """``centred_window``: the maximum (``how`` 1), minimum (-1) or mean (0) over ``window``
    values centred on each, cut to those that exist."""
    m = v.shape[0]
    w = min(window, m)
    if w <= 1:
        return v.copy()
    left = (w - 1) // 2
    out = np.empty(m, np.float32)
    for i in range(m):
        a, b = max(0, i - left), min(m, i + w - left)
        best = v[a]
        total = _F32(0.0)
        for j in range(a, b):
            if how == 1:
                best = max(best, v[j])
            elif how == -1:
                best = min(best, v[j])
            else:
                total += v[j]
        out[i] = best if how != 0 else total / _F32(b - a)
    return out


@nb.njit(cache=True, nogil=True)
def _lower_median(v: np.ndarray) -> np.float32:
    """The ``(m - 1) // 2``-th smallest of ``v`` (``torch.median``'s lower median), by selection."""
    s = v.copy()
    want = (s.shape[0] - 1) // 2
    lo, hi = 0, s.shape[0] - 1
    while lo < hi:  # Hoare's selection: the wanted rank stays inside [lo, hi]
        pivot = s[(lo + hi) // 2]
        i, j = lo, hi
        while i <= j:
            while s[i] < pivot:
                i += 1
            while s[j] > pivot:
                j -= 1
            if i <= j:
                s[i], s[j] = s[j], s[i]
                i += 1
                j -= 1
        if want <= j:
            hi = j
        elif want >= i:
            lo = i
        else:
            break
    return s[want]


@nb.njit(cache=True, nogil=True)
def _window_max(v: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """The maximum of the ``w`` values before each value of ``v`` and of the ``w`` after it
    (-inf past the ends), by doubling runs (``sliding_max``'s way): each pass a vectorised
    maximum of two shifted copies, about log2(w) of them."""
    m = v.shape[0]
    run = np.empty(m + 2 * w, np.float32)
    for i in range(run.shape[0]):
        run[i] = v[i - w] if w <= i < w + m else -np.inf
    spare = np.empty(run.shape[0], np.float32)
    span, size = 1, run.shape[0]
    while span < w:  # run[i] = max(padded[i : i + span]), span doubling (two overlapping at the end)
        step = min(span, w - span)
        size -= step
        here, ahead, out = run[:size], run[step : step + size], spare[:size]  # (two buffers: vectorised)
        for i in range(size):
            out[i] = max(here[i], ahead[i])
        run, spare = spare, run
        span += step
    # run[i] = max(padded[i : i + w]); v[b] is padded[b + w]
    before = np.empty(m, np.float32)
    after = np.empty(m, np.float32)
    for b in range(m):
        before[b], after[b] = run[b], run[b + w + 1]
    return before, after


@nb.njit(cache=True, nogil=True)
def _candidates(
    x: np.ndarray, feature: np.ndarray, negative: np.ndarray, ints: np.ndarray, floats: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Columns, heights, signs and refined columns of the candidates (``_coarse_peaks``, then
    ``_refined`` with the spike rule)."""
    n = feature.shape[0]
    sub, refractory, reach, spike = ints[1], ints[2], ints[3], ints[4]
    n_sub = (n + sub - 1) // sub
    maxima = _block_max(feature, sub)
    d = max(2, -(-refractory // sub))
    near = max(1, d - 1)  # peak_mask: over every block within near before, at least every one after
    before, after = _window_max(maxima, near)
    cols = np.empty(n_sub, np.int64)
    count = 0
    for b in range(n_sub):
        v = maxima[b]
        peak = v > before[b] and v >= after[b]
        if peak:
            at = b * sub
            for i in range(b * sub + 1, min(n, (b + 1) * sub)):
                if feature[i] > feature[at]:
                    at = i
            cols[count] = at
            count += 1
    cols = cols[:count]
    height = np.empty(count, np.float32)
    sign = np.empty(count, np.float32)
    refined = np.empty(count, np.int64)
    width = 2 * reach + 1
    window = np.empty(width, np.float32)
    for c in range(count):
        col = cols[c]
        sign[c] = _F32(-1.0) if negative[col] else _F32(1.0)
        acc = 0.0
        for t in range(width):
            window[t] = x[min(max(col - reach + t, 0), n - 1)]  # past an end, the end sample
            acc += window[t]
        mean = _F32(acc / width)
        best = 0
        top = (window[0] - mean) * sign[c]
        for t in range(1, width):
            v = (window[t] - mean) * sign[c]
            if v > top:
                top, best = v, t
        refined[c] = min(max(col - reach + best, 0), n - 1)
        h = feature[col]
        if spike:
            low = window[min(max(best - spike, 0), width - 1)] * sign[c]
            for t in range(best - spike, best + spike + 1):
                low = min(low, window[min(max(t, 0), width - 1)] * sign[c])
            peak_value = window[best] * sign[c]
            half = (peak_value + low) / _F32(2.0)
            wide = 0
            for t in range(best - spike, best + spike + 1):
                if window[min(max(t, 0), width - 1)] * sign[c] >= half:
                    wide += 1
            if _F32(wide) * floats[10] < floats[11]:
                h = _F32(0.0)  # a spike is no beat
        height[c] = h
    return cols, height, sign, refined


@nb.njit(cache=True, nogil=True)
def _one_rhythm_floor(
    noise: np.ndarray,
    level: np.ndarray,
    cols: np.ndarray,
    height: np.ndarray,
    sign: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
) -> None:
    """``Ricker.local_thresholds``' exception to the noise floor, in place: where a block's floor
    is over the beats (``busy``) while the candidates around it are of one polarity, the floor is
    the beats' own (0): a rhythm too fast for a quiet half-second, not noise."""
    n_blocks, block, span = noise.shape[0], ints[0], ints[6]
    busy = np.empty(n_blocks, np.bool_)
    any_busy = False
    for b in range(n_blocks):
        busy[b] = floats[2] * noise[b] >= floats[9] * level[b]
        any_busy |= busy[b]
    if not any_busy:
        return
    signed64 = np.zeros(n_blocks, np.float64)  # (summed in float64, as block_signs does)
    plain64 = np.zeros(n_blocks, np.float64)
    for c in range(cols.shape[0]):
        b = cols[c] // block
        signed64[b] += np.float64(height[c]) * np.float64(sign[c])
        plain64[b] += np.float64(height[c])
    signed = np.empty(n_blocks, np.float32)
    plain = np.empty(n_blocks, np.float32)
    for b in range(n_blocks):
        signed[b], plain[b] = signed64[b], plain64[b]
    signed, heights = _centred(signed, span, 0), _centred(plain, span, 0)
    for b in range(n_blocks):
        if busy[b] and abs(signed[b]) >= floats[8] * heights[b] and heights[b] > 0:
            noise[b] = _F32(0.0)


@nb.njit(cache=True, nogil=True)
def _thresholds(
    feature: np.ndarray,
    cols: np.ndarray,
    height: np.ndarray,
    sign: np.ndarray,
    magnitude: np.float32,
    ints: np.ndarray,
    floats: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per block: the threshold, the local beat level and the search-back threshold
    (``Ricker.thresholds``); and 0, 1 where the row holds no ECG (flat), 2 where its contrast is
    low (the tensor path's rhythm check must answer)."""
    n = feature.shape[0]
    block, span, level_window = ints[0], ints[6], ints[7]
    threshold, global_floor, noise_factor, min_contrast = floats[0], floats[1], floats[2], floats[4]
    n_blocks = (n + block - 1) // block
    block_max = _block_max(feature, block)
    block_mean = np.empty(n_blocks, np.float32)
    for b in range(n_blocks):
        block_mean[b] = _mean64(feature, b * block, min(n, (b + 1) * block))
    envelope = _centred(block_max, span, 1)
    typical = _lower_median(envelope)
    limit = typical / min_contrast
    below = 0
    for i in range(n):
        if feature[i] <= limit:
            below += 1
    flat = typical <= 0 or typical <= floats[7] * magnitude
    empty = np.empty(0, np.float32)
    if flat:
        return empty, empty, empty, 1
    if below <= (n - 1) // 2:
        return empty, empty, empty, 2
    level = _centred(envelope, level_window, -1)
    noise = _centred(block_mean, span, -1)
    _one_rhythm_floor(noise, level, cols, height, sign, ints, floats)
    per_block = np.empty(n_blocks, np.float32)
    secondary = np.empty(n_blocks, np.float32)
    for b in range(n_blocks):
        floor = max(global_floor * typical, noise_factor * noise[b])
        per_block[b] = max(max(threshold * level[b], floor), _TINY)
        secondary[b] = max(floats[6] * per_block[b], floor)
    return per_block, level, secondary, 0


@nb.njit(cache=True, nogil=True)
def _usual_gap_exceeded(gaps: np.ndarray, rr_limit: float) -> np.ndarray:
    """Which gaps exceed ``rr_limit`` times the lower median of the gaps within
    ``RR_NEIGHBOURS`` either side, themselves included (``neighbour_median``)."""
    m = gaps.shape[0]
    near = np.empty(2 * RR_NEIGHBOURS + 1, np.float64)
    long = np.zeros(m, np.bool_)
    for g in range(m):
        count = 0
        for j in range(max(0, g - RR_NEIGHBOURS), min(m, g + RR_NEIGHBOURS + 1)):
            v = gaps[j]
            at = count
            while at > 0 and near[at - 1] > v:  # insertion: at most nine values
                near[at] = near[at - 1]
                at -= 1
            near[at] = v
            count += 1
        long[g] = gaps[g] > rr_limit * near[(count - 1) // 2]
    return long


@nb.njit(cache=True, nogil=True)
def _search_back(
    state: np.ndarray, cols: np.ndarray, height: np.ndarray, rr_limit: float, after: int, before: int
) -> None:
    """``_search_back`` over one row's candidates (sorted by column): ``state`` 1 marks a beat,
    2 a weak candidate; the weak ones the rhythm asks for become beats, in place."""
    beats = np.empty(state.shape[0], np.int64)
    for _ in range(SEARCH_BACK_PASSES):  # each pass fills at most one beat per gap
        m = 0
        weak = 0
        for c in range(state.shape[0]):
            if state[c] == 1:
                beats[m] = c
                m += 1
            elif state[c] == 2:
                weak += 1
        if m < 2 or weak == 0:
            break
        gaps = np.empty(m - 1, np.float64)
        for g in range(m - 1):
            gaps[g] = cols[beats[g + 1]] - cols[beats[g]]
        long = _usual_gap_exceeded(gaps, rr_limit)
        chosen = 0
        for g in range(m - 1):
            if not long[g]:
                continue
            start, end = cols[beats[g]], cols[beats[g + 1]]
            pick = -1
            for c in range(beats[g] + 1, beats[g + 1]):  # the highest weak one (the first of equal heights)
                if state[c] == 2 and cols[c] - start >= after and end - cols[c] >= before:
                    if pick < 0 or height[c] > height[pick]:
                        pick = c
            if pick >= 0:
                beats[g] = -1 - pick  # (marked; set once every gap has looked)
                chosen += 1
        if chosen == 0:
            break
        for g in range(m - 1):
            if beats[g] < 0:
                state[-1 - beats[g]] = 1


@nb.njit(cache=True, nogil=True)
def _without_spikes(x: np.ndarray, refined: np.ndarray, sign: np.ndarray, height: np.ndarray, spike: int) -> np.ndarray:
    """``spikes.without_spikes`` on one row: a copy of ``x`` with each spike candidate (``height``
    0) taken out, its samples at or above half its height next to its extremum set to the
    sample just before them."""
    n = x.shape[0]
    out = x.copy()
    for c in range(refined.shape[0]):
        at = refined[c]
        if height[c] != 0 or at - spike - 1 < 0 or at + spike >= n:
            continue
        s = sign[c]
        low = x[at - spike] * s
        for t in range(at - spike, at + spike + 1):
            low = min(low, x[t] * s)
        half = (x[at] * s + low) / _F32(2.0)
        left = 0
        for t in range(at - 1, at - spike - 1, -1):
            if x[t] * s < half:
                break
            left += 1
        right = 0
        for t in range(at + 1, at + spike + 1):
            if x[t] * s < half:
                break
            right += 1
        value = x[at - left - 1]
        for t in range(at - left, at + right + 1):
            out[t] = value
    return out


@nb.njit(cache=True, nogil=True)
def detect(
    x: np.ndarray, kernel: np.ndarray, ints: np.ndarray, floats: np.ndarray, rr_limit: float
) -> tuple[np.ndarray, bool]:
    """The R peaks of one row ``x`` (``(n,)`` float32; ``kernel``, ``ints``, ``floats`` and
    ``rr_limit`` as :class:`~devicepipe.ecg.compiled.Plan` holds them): int64 sample indices,
    sorted, and whether the row is handed back (low contrast: no peaks given)."""
    n = x.shape[0]
    block, edge, close, spike, passes = ints[0], ints[5], ints[8], ints[4], ints[9]
    close_ratio, polarity_ratio = floats[3], floats[5]
    for p in range(passes):  # (spikes.SPIKE_PASSES: spikes that hide beats out, and again)
        response = _filter(x, kernel, _mean64(x, 0, edge), _mean64(x, n - edge, n))
        feature = np.empty(n, np.float32)
        negative = np.empty(n, np.bool_)
        for i in range(n):
            negative[i] = np.signbit(response[i])
            feature[i] = abs(response[i])
        cols, height, sign, refined = _candidates(x, feature, negative, ints, floats)
        per_block, level, secondary, found = _thresholds(feature, cols, height, sign, _abs_max(x), ints, floats)
        if found != 0:
            return np.empty(0, np.int64), found == 2
        lowest = secondary if rr_limit > 0 else per_block  # (Ricker.hides_beats)
        hides = False
        for c in range(cols.shape[0]):
            if height[c] == 0 and feature[cols[c]] > lowest[cols[c] // block]:
                hides = True
                break
        if spike == 0 or p == passes - 1 or not hides:
            break
        x = _without_spikes(x, refined, sign, height, spike)
    m = cols.shape[0]
    state = np.zeros(m, np.int8)  # 1 a beat, 2 weak (a candidate for the search-back), 0 neither
    for c in range(m):
        b = cols[c] // block
        if height[c] > per_block[b]:
            state[c] = 1
        elif rr_limit > 0 and height[c] > secondary[b]:
            state[c] = 2
    at_level = level[cols // block]  # each candidate's local beat level
    if close_ratio > 0:
        _t_wave_rule(state, cols, height, at_level, close, close_ratio)
    if polarity_ratio > 0:
        _polarity_rule(state, cols, height, sign, at_level, close, polarity_ratio, rr_limit > 0)
    if rr_limit > 0:
        _search_back(state, cols, height, rr_limit, close, ints[2])
    return _refined_beats(state, refined), False


@nb.njit(cache=True, nogil=True)
def _t_wave_rule(
    state: np.ndarray, cols: np.ndarray, height: np.ndarray, level: np.ndarray, close: int, ratio: float
) -> None:
    """Pan and Tompkins' T-wave rule on the beats (``state`` 1), in place: one within ``close``
    samples of the beat before it (dropped or not), under ``ratio`` of the smaller of that one's
    height and its own local ``level``, is no beat (``_weak_followers``)."""
    last = -1
    for c in range(state.shape[0]):
        if state[c] != 1:
            continue
        if last >= 0 and cols[c] - cols[last] <= close:
            if height[c] < ratio * min(height[last], level[c]):
                state[c] = 3  # (dropped, but still the one the next candidate looks back to)
        last = c
    for c in range(state.shape[0]):
        if state[c] == 3:
            state[c] = 0


@nb.njit(cache=True, nogil=True)
def _polarity_rule(
    state: np.ndarray,
    cols: np.ndarray,
    height: np.ndarray,
    sign: np.ndarray,
    level: np.ndarray,
    close: int,
    ratio: float,
    search_back: bool,
) -> None:
    """The polarity rule on the beats (``state`` 1), in place: one of the minority polarity
    within ``close`` samples of the beat before it, under ``ratio`` of the beats' typical level,
    becomes weak evidence (``state`` 2, a beat only where the search-back wants one; none
    without the search-back)."""
    total = _F32(0.0)
    count = 0
    for c in range(state.shape[0]):
        if state[c] == 1:
            total += sign[c]
            count += 1
    if not count:
        return
    levels = np.empty(count, np.float32)
    j = 0
    for c in range(state.shape[0]):
        if state[c] == 1:
            levels[j] = level[c]
            j += 1
    typical = _lower_median(levels)
    dominant = _F32(1.0) if total > 0 else (_F32(-1.0) if total < 0 else _F32(0.0))
    last = -1
    for c in range(state.shape[0]):
        if state[c] != 1:
            continue
        soon = last >= 0 and cols[c] - cols[last] <= close
        last = c
        if soon and sign[c] != dominant and dominant != 0 and height[c] < ratio * typical:
            state[c] = 2 if search_back else 0


@nb.njit(cache=True, nogil=True)
def _refined_beats(state: np.ndarray, refined: np.ndarray) -> np.ndarray:
    """The beats' (``state`` 1) refined positions, sorted, without repeats (two candidates may
    settle on one sample)."""
    peaks = np.empty(state.shape[0], np.int64)
    count = 0
    for c in range(state.shape[0]):
        if state[c] != 1:
            continue
        at = count
        while at > 0 and peaks[at - 1] > refined[c]:
            at -= 1
        if at > 0 and peaks[at - 1] == refined[c]:
            continue
        peaks[at + 1 : count + 1] = peaks[at:count].copy()
        peaks[at] = refined[c]
        count += 1
    return peaks[:count]
