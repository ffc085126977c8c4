"""Frequency-domain heart-rate variability: VLF, LF and HF power of the NN intervals.

The method is one the 1996 Task Force of the ESC and NASPE accepts, interpolation plus Welch's
periodogram, set as NeuroKit2's ``hrv_frequency`` sets it so that the two agree on the same
intervals: the NN intervals (ms) are placed at the times of the beats that end them, the kept
ones interpolated by a quadratic spline onto an even grid of 100 Hz (gaps left by excluded
intervals are bridged), the mean removed, and the power spectral density estimated with Hann
windows half the recording long, overlapping by half (three windows), each zero-padded to twice
its length. The grid is NeuroKit2's: a coarser one shifts the frequency bins against the band
edges and folds the spline's fast wiggles (large in atrial fibrillation) into the bands, which
moves a short recording's LF or HF by up to 10 %. Past 5.5 hours the grid thins to keep
:data:`MAX_GRID` points (a day's at about 23 Hz), where the bins are too fine for either to
matter. One difference from NeuroKit2 is deliberate: its window is half the grid, rounded down,
which for a quarter of all lengths leaves two windows and the last quarter of the recording
out; here the window is rounded down to an even length, so that three always cover it.

A band's power is the PSD integrated (trapezoid rule) over the band's frequencies at or above
the lowest one the window resolves (two cycles per window); a band with no such frequency has no
power (None). Bands are the Task Force's: VLF 0.0033-0.04 Hz, LF 0.04-0.15 Hz, HF 0.15-0.4 Hz;
``window_s=300`` gives its 5-minute windows instead.

The intervals are host numbers (a day's are about 100 000), so this runs in NumPy and SciPy. The
spline is built and evaluated and the windows transformed one part at a time: a day's grid of
2,000,000 points in three windows zero-padded to 2,000,000 each took about 150 MB at once through
``scipy.signal.welch`` (every window's transform held together), and takes a third of that here,
with the same estimate (within floating-point rounding; tested against SciPy's); the spline's
pieces (:func:`spline_on_grid`) keep it so however many intervals there are (69 MiB at the peak
for 100,800 intervals and for 2,822,170 alike, where one spline through all of them took the
latter to 220 MiB).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import positive

__all__ = ["BANDS_HZ", "MIN_SPAN_S", "FrequencyHRV", "hrv_frequency", "spline_on_grid", "welch_psd"]

#: The Task Force's bands, Hz: [low, high) each.
BANDS_HZ = {"vlf": (0.0033, 0.04), "lf": (0.04, 0.15), "hf": (0.15, 0.4)}
#: The shortest stretch of NN intervals analysed, in seconds: the Task Force asks for about two
#: minutes for LF (ten cycles of its lowest frequency would be four).
MIN_SPAN_S = 120.0
#: The even grid the intervals are interpolated onto, Hz.
RATE_HZ = 100.0
#: The most points that grid holds (a day's intervals are interpolated more coarsely).
MAX_GRID = 2_000_000
#: The most grid points the spline is evaluated at in one call.
BLOCK = 1 << 18
#: Intervals per piece of the spline (:func:`spline_on_grid`), and intervals either side of a
#: piece that its spline passes through as well.
PIECE = 1 << 16
HALO = 256


@dataclass(frozen=True)
class FrequencyHRV:
    """Spectral HRV of one recording.

    ``vlf_ms2``, ``lf_ms2``, ``hf_ms2``: power in ms² (None where the window resolves none of the
    band: VLF under about 10 minutes); ``total_ms2``: power from the lowest resolved frequency to
    0.4 Hz; ``lf_hf``: LF / HF; ``lf_nu``, ``hf_nu``: LF and HF in normalised units, percent of
    LF + HF; ``window_s``: each Welch window, s; ``lowest_hz``: the lowest frequency used;
    ``n_intervals``: the NN intervals interpolated; ``method``: the estimate, in words.
    """

    vlf_ms2: float | None
    lf_ms2: float | None
    hf_ms2: float | None
    total_ms2: float
    lf_hf: float | None
    lf_nu: float | None
    hf_nu: float | None
    window_s: float
    lowest_hz: float
    n_intervals: int
    method: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _kept_intervals(intervals_ms: Any, times_s: Any, kept: Any) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hrv_frequency`'s intervals (ms) and their beats' times (s), float64 ``(m,)``, the
    ``kept`` ones only; a clear error for arrays of two shapes or times that do not increase."""
    rr, t = np.asarray(intervals_ms, dtype=np.float64), np.asarray(times_s, dtype=np.float64)
    if rr.shape != t.shape or rr.ndim != 1:
        raise DevicepipeError(
            f"hrv_frequency(): intervals_ms and times_s must have one shape (n,), got {rr.shape} and {t.shape}",
            fix="pass the interval ending at each beat and that beat's time.",
            param="times_s",
        )
    if kept is not None:
        rr, t = rr[np.asarray(kept, dtype=bool)], t[np.asarray(kept, dtype=bool)]
    if np.any(np.diff(t) <= 0):
        raise DevicepipeError(
            "hrv_frequency(): times_s must increase", fix="sort the intervals by time.", param="times_s"
        )
    return rr, t


def hrv_frequency(
    intervals_ms: np.ndarray,
    times_s: np.ndarray,
    kept: np.ndarray | None = None,
    *,
    window_s: float | None = None,
    rate_hz: float = RATE_HZ,
) -> FrequencyHRV | None:
    """VLF, LF and HF power of NN intervals, or None when the kept ones span under :data:`MIN_SPAN_S`.

    Parameters
    ----------
    intervals_ms : shape ``(n,)``, the RR intervals in milliseconds.
    times_s : shape ``(n,)``, the time of the beat that ends each interval, s, increasing.
    kept : bool, shape ``(n,)``: the normal-to-normal intervals to use (all when None); the
        others (around ectopic beats, implausible ones) are left out and bridged.
    window_s : each Welch window in seconds; None: half the span of the kept intervals.
    rate_hz : the even grid the intervals are interpolated onto, Hz (at most :data:`MAX_GRID` points).
    """
    rate_hz = positive(rate_hz, "hrv_frequency()", "rate_hz", "Hz")  # (0 had been a ZeroDivisionError)
    rr, t = _kept_intervals(intervals_ms, times_s, kept)
    if rr.size < 4 or t[-1] - t[0] < MIN_SPAN_S:
        return None
    rate_hz = min(rate_hz, MAX_GRID / (t[-1] - t[0]))
    grid = np.arange(t[0], t[-1] + 1 / rate_hz, 1 / rate_hz)
    # the quadratic spline through the intervals (interp1d(kind="quadratic")'s), held at the last
    # interval past the last beat
    even = spline_on_grid(t, rr, grid)
    even[grid > t[-1]] = rr[-1]
    del grid  # (16 MB for a day's)
    even -= even.mean()
    # three windows that cover the grid (an even length, so that half of one is a whole step)
    per = min(int(window_s * rate_hz), even.size) if window_s else even.size // 4 * 2
    freq, psd = welch_psd(even, rate_hz, per, 2 * per)
    lowest = 2 * rate_hz / per
    power = {name: _band(freq, psd, max(lo, lowest), hi) for name, (lo, hi) in BANDS_HZ.items()}
    total = _band(freq, psd, lowest, BANDS_HZ["hf"][1]) or 0.0
    lf, hf = power["lf"], power["hf"]
    both = (lf or 0.0) + (hf or 0.0)
    return FrequencyHRV(
        vlf_ms2=power["vlf"],
        lf_ms2=lf,
        hf_ms2=hf,
        total_ms2=total,
        lf_hf=lf / hf if lf is not None and hf else None,
        lf_nu=100 * lf / both if lf is not None and both else None,
        hf_nu=100 * hf / both if hf is not None and both else None,
        window_s=per / rate_hz,
        lowest_hz=lowest,
        n_intervals=int(rr.size),
        method=f"Welch, Hann windows of {per / rate_hz:.0f} s overlapping by half, "
        f"on NN intervals interpolated at {rate_hz:.3g} Hz (quadratic)",
    )


def spline_on_grid(
    t: np.ndarray, y: np.ndarray, grid: np.ndarray, *, piece: int = PIECE, halo: int = HALO
) -> np.ndarray:
    """The quadratic interpolating spline through ``(t, y)`` (``(n,)`` each, ``t`` increasing),
    ``scipy.interpolate.make_interp_spline(t, y, k=2)``'s (:func:`quadratic_spline`: without
    SciPy, whose interpolation module took 0.3 to 1.1 s to import, most of a run's HRV), at the
    points of ``grid`` (``(m,)``, increasing): ``(m,)``.

    Built ``piece`` intervals at a time, each piece's spline also through the ``halo`` intervals
    either side of it and evaluated only on the piece. An interpolating spline's values depend on
    distant data through a collocation system whose solution forgets an end condition
    geometrically (by about a sixth per interval for a quadratic spline), so past a few dozen
    intervals a piece's spline is the whole one's to floating-point rounding (tested against it;
    on the tested intervals, bit for bit from a halo of 32), and memory stays that of one piece:
    the whole spline's solve held about 79 bytes an interval at once, 213 MiB for the 2.8 M of four
    weeks of beats."""
    n = t.size
    out = np.empty_like(grid)
    for a in range(0, n, piece):
        b = n if n - a < piece + 2 else a + piece  # (a tail too short for a spline joins the piece before)
        lo, hi = max(0, a - halo), min(n, b + halo)
        knots, coef = quadratic_spline(t[lo:hi], y[lo:hi])
        first = 0 if a == 0 else int(np.searchsorted(grid, t[a]))
        last = grid.size if b == n else int(np.searchsorted(grid, t[b]))
        for g in range(first, last, BLOCK):  # (each point's value is the spline's there: as one call)
            out[g : min(last, g + BLOCK)] = spline_at(knots, coef, grid[g : min(last, g + BLOCK)])
        if b == n:
            break
    return out


def quadratic_spline(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The quadratic B-spline through ``(x, y)`` (``(n,)`` each, ``x`` increasing, ``n >= 3``) with
    ``scipy.interpolate.make_interp_spline(x, y, k=2)``'s knots (the midpoints between the data
    sites but the first and last, each end's site three times): its knots ``(n + 3,)`` and
    coefficients ``(n,)``. At each site three basis functions are not zero, those of the
    coefficients before, at and after its own: the collocation system is tridiagonal, and
    diagonally dominant, and is solved by cyclic reduction (:func:`tridiagonal_solve`)."""
    n = x.size
    mids = (x[1:] + x[:-1]) / 2
    knots = np.concatenate([np.full(3, x[0]), mids[1:-1], np.full(3, x[-1])])
    at = np.clip(np.searchsorted(knots, x, side="right") - 1, 2, n - 1)
    b0, b1, b2 = _basis(knots, at, x)
    shift = at - np.arange(n) - 1  # -1, 0 or 1: where the three columns lie against the diagonal
    below = np.where(shift == 0, b0, np.where(shift == -1, b1, 0.0))
    diagonal = np.where(shift == 0, b1, np.where(shift == 1, b0, b2))
    above = np.where(shift == 0, b2, np.where(shift == 1, b1, 0.0))
    return knots, tridiagonal_solve(below, diagonal, above, np.asarray(y, dtype=np.float64))


def _basis(knots: np.ndarray, at: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three quadratic B-splines not zero at each ``x`` in its knot interval ``at``
    (``knots[at] <= x < knots[at + 1]``): those of coefficients ``at - 2``, ``at - 1`` and ``at``
    (Cox and de Boor's recursion)."""
    t0, t1, tm, t2 = knots[at], knots[at + 1], knots[at - 1], knots[at + 2]
    left = (t1 - x) / (t1 - t0)  # the two linear ones
    right = (x - t0) / (t1 - t0)
    b0 = (t1 - x) / (t1 - tm) * left
    b1 = (x - tm) / (t1 - tm) * left + (t2 - x) / (t2 - t0) * right
    b2 = (x - t0) / (t2 - t0) * right
    return b0, b1, b2


def spline_at(knots: np.ndarray, coef: np.ndarray, points: np.ndarray) -> np.ndarray:
    """A quadratic B-spline (:func:`quadratic_spline`'s) at ``points`` ``(m,)``; past its ends, the
    end pieces' polynomials (as SciPy's ``BSpline`` extrapolates)."""
    at = np.clip(np.searchsorted(knots, points, side="right") - 1, 2, coef.size - 1)
    b0, b1, b2 = _basis(knots, at, points)
    return b0 * coef[at - 2] + b1 * coef[at - 1] + b2 * coef[at]


def tridiagonal_solve(below: np.ndarray, diagonal: np.ndarray, above: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``x`` with ``below[i] x[i-1] + diagonal[i] x[i] + above[i] x[i+1] = rhs[i]`` (``(n,)`` each;
    ``below[0]`` and ``above[-1]`` unused), by parallel cyclic reduction: each pass eliminates the
    neighbours at twice the distance of the pass before, about log2(n) passes of array operations
    (stable for a diagonally dominant system, as a spline's collocation is)."""
    a, b, c, d = (np.array(v, dtype=np.float64) for v in (below, diagonal, above, rhs))
    n = b.size
    a[0] = 0.0
    c[-1] = 0.0
    step = 1
    while step < n:
        # each row takes away multiples of the rows ``step`` before and after it
        a_prev, b_prev, c_prev, d_prev = (np.concatenate([np.zeros(step), v[:-step]]) for v in (a, b, c, d))
        a_next, b_next, c_next, d_next = (np.concatenate([v[step:], np.zeros(step)]) for v in (a, b, c, d))
        b_prev[:step] = 1.0  # (no row there: its multiple is 0)
        b_next[n - step :] = 1.0
        alpha, gamma = -a / b_prev, -c / b_next
        b = b + alpha * c_prev + gamma * a_next
        d = d + alpha * d_prev + gamma * d_next
        a, c = alpha * a_prev, gamma * c_next
        step *= 2
    return d / b


def welch_psd(x: np.ndarray, fs: float, per: int, nfft: int) -> tuple[np.ndarray, np.ndarray]:
    """Welch's power spectral density of ``x`` (``(n,)``, sampled at ``fs`` Hz): periodic Hann
    windows of ``per`` samples overlapping by ``per // 2``, each zero-padded to ``nfft``, no
    detrending, one-sided, density scaling (the unit of ``x`` squared per Hz), the windows'
    periodograms averaged: ``scipy.signal.welch(x, fs, "hann", per, nfft=nfft, detrend=False)``,
    one window at a time. Returns the frequencies ``(nfft // 2 + 1,)`` in Hz and the density."""
    step = per - per // 2
    window = np.hanning(per + 1)[:-1]  # periodic: SciPy's get_window("hann", per)
    starts = range(0, x.size - per + 1, step)
    total = np.zeros(nfft // 2 + 1)
    for a in starts:
        spectrum = np.fft.rfft(x[a : a + per] * window, n=nfft)
        total += spectrum.real**2 + spectrum.imag**2
    psd = total * (1.0 / (fs * np.sum(window**2) * len(starts)))
    psd[1 : None if nfft % 2 else -1] *= 2  # each frequency's negative twin (not 0 Hz, nor Nyquist's)
    return np.fft.rfftfreq(nfft, 1.0 / fs), psd


def _band(freq: np.ndarray, psd: np.ndarray, lo: float, hi: float) -> float | None:
    """The PSD integrated over ``[lo, hi)`` Hz, or None where no frequency falls there (or all is 0)."""
    inside = (freq >= lo) & (freq < hi)
    if inside.sum() < 2:
        return None
    power = float(np.trapezoid(psd[inside], freq[inside]))
    return power if power > 0 else None
