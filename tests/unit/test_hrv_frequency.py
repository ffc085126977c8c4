"""Frequency-domain HRV against hand-computed powers of known modulations."""

import numpy as np
import pytest

from devicepipe.core.errors import DevicepipeError
from devicepipe.heart.spectral import hrv_frequency


def _modulated(duration_s: float, parts: list[tuple[float, float]], mean_ms: float = 800.0):
    """RR intervals (ms) and beat times (s) of a heart whose RR is ``mean_ms`` plus sinusoids
    ``(amplitude_ms, frequency_hz)``, sampled beat by beat."""
    times, rr = [0.0], []
    while times[-1] < duration_s:
        t = times[-1]
        x = mean_ms + sum(a * np.sin(2 * np.pi * f * t) for a, f in parts)
        rr.append(x)
        times.append(t + x / 1000)
    return np.array(rr), np.array(times[1:])


def test_a_sinusoid_s_power_is_half_its_amplitude_squared_in_its_band():
    # 30 ms at 0.1 Hz (LF) and 20 ms at 0.25 Hz (HF): powers 450 and 200 ms² (A² / 2)
    rr, t = _modulated(1800, [(30.0, 0.1), (20.0, 0.25)])
    f = hrv_frequency(rr, t)
    assert f.lf_ms2 == pytest.approx(450, rel=0.05)
    assert f.hf_ms2 == pytest.approx(200, rel=0.05)
    assert f.lf_hf == pytest.approx(2.25, rel=0.05)
    assert f.lf_nu + f.hf_nu == pytest.approx(100)
    assert f.vlf_ms2 is None or f.vlf_ms2 < 5  # nothing was put there
    assert f.total_ms2 == pytest.approx(650, rel=0.05)


def test_a_modulation_moved_to_another_band_moves_its_power():
    rr, t = _modulated(1800, [(30.0, 0.02)])  # VLF only
    f = hrv_frequency(rr, t)
    assert f.vlf_ms2 == pytest.approx(450, rel=0.1)
    assert f.lf_ms2 < 20 and f.hf_ms2 < 5


def test_excluded_intervals_are_left_out_as_if_never_given():
    rr, t = _modulated(900, [(30.0, 0.1), (20.0, 0.25)])
    spoiled = rr.copy()
    spoiled[::50] = 400.0  # ectopic beats' intervals, excluded by the mask
    kept = np.ones(rr.size, bool)
    kept[::50] = False
    a = hrv_frequency(spoiled, t, kept)
    b = hrv_frequency(rr[kept], t[kept])
    assert a == b
    assert a.lf_ms2 == pytest.approx(450, rel=0.1)  # the gaps are bridged, not read as a dip
    assert hrv_frequency(spoiled, t).hf_ms2 > 2 * a.hf_ms2  # what leaving them in would do


def test_five_minute_windows_resolve_no_vlf_in_ten_minutes_of_intervals_but_give_lf_and_hf():
    rr, t = _modulated(600, [(30.0, 0.1), (20.0, 0.25)])
    f = hrv_frequency(rr, t, window_s=300)
    assert f.window_s == pytest.approx(300, abs=0.1) and f.lowest_hz == pytest.approx(2 / 300, rel=0.01)
    assert f.lf_ms2 == pytest.approx(450, rel=0.1) and f.hf_ms2 == pytest.approx(200, rel=0.1)


def test_under_two_minutes_there_is_no_spectrum():
    rr, t = _modulated(100, [(30.0, 0.1)])
    assert hrv_frequency(rr, t) is None


def test_intervals_and_times_of_different_shapes_are_refused():
    with pytest.raises(DevicepipeError, match="one shape"):
        hrv_frequency(np.ones(10), np.arange(9.0))


def test_the_summary_s_hrv_takes_only_intervals_between_two_normal_beats():
    import torch

    from devicepipe.artifacts.write import heart_rate_summary

    rr, t = _modulated(300, [(30.0, 0.1)])
    peaks = torch.as_tensor(np.round(np.concatenate([[0.0], t]) * 250).astype(np.int64))
    classes = np.full(peaks.numel(), "N")
    classes[[40, 90, 150, 151, 200]] = ["S", "V", "V", "V", "Q"]  # (on time: the cleaning keeps them all)
    plain = heart_rate_summary(peaks, 250.0)
    classed = heart_rate_summary(peaks, 250.0, classes)
    assert plain["frequency"]["n_intervals"] == plain["n_intervals"] == peaks.numel() - 1
    # each lone beat takes its two intervals, the couplet three: 2 + 2 + 3 + 2
    assert classed["frequency"]["n_intervals"] == plain["n_intervals"] - 9
    assert classed["n_intervals"] == classed["frequency"]["n_intervals"]  # the time domain takes the same
    assert "between two N beats" in classed["nn_cleaning"] and "N beats" not in plain["nn_cleaning"]


@pytest.mark.parametrize(
    ("n", "per", "nfft"), [(4000, 2000, 4000), (4001, 999, 1998), (10_000, 301, 603), (64, 64, 128)]
)
def test_welch_psd_is_scipy_s_welch(n, per, nfft):
    from scipy import signal

    from devicepipe.heart.spectral import welch_psd

    x = np.random.default_rng(n).normal(size=n).cumsum()
    freq, psd = welch_psd(x, 4.0, per, nfft)
    f_ref, p_ref = signal.welch(x, fs=4.0, window="hann", nperseg=per, nfft=nfft, detrend=False, scaling="density")
    np.testing.assert_allclose(freq, f_ref, rtol=1e-15)
    np.testing.assert_allclose(psd, p_ref, rtol=1e-11, atol=1e-12 * p_ref.max())


def test_a_day_s_spectrum_is_scipy_s_and_holds_half_of_what_scipy_s_welch_held():
    import tracemalloc

    from scipy import interpolate, signal

    rng = np.random.default_rng(0)
    rr = rng.normal(857.0, 40.0, 100_800)  # a day of beats
    t = np.cumsum(rr) / 1000
    hrv_frequency(rr[:300], t[:300])  # (imports and caches out of the measure)
    tracemalloc.start()
    ours = hrv_frequency(rr, t)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # the same estimate in one call each, as SciPy gives it (about 150 MB at once)
    rate = 2_000_000 / (t[-1] - t[0])
    grid = np.arange(t[0], t[-1] + 1 / rate, 1 / rate)
    even = interpolate.interp1d(t, rr, kind="quadratic", bounds_error=False, fill_value=(rr[0], rr[-1]))(grid)
    per = grid.size // 4 * 2
    freq, psd = signal.welch(even - even.mean(), fs=rate, window="hann", nperseg=per, nfft=2 * per, detrend=False)
    band = (freq >= 0.04) & (freq < 0.15)
    assert ours.lf_ms2 == pytest.approx(np.trapezoid(psd[band], freq[band]), rel=1e-9)
    assert peak < 90 * 2**20, f"{peak / 2**20:.0f} MiB"


def _irregular(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` RR intervals (ms) and beat times (s) as hard on a spline as a Holter's: atrial
    fibrillation's independent intervals, sinus stretches, pauses, and gaps of up to a minute where
    excluded intervals were bridged."""
    rng = np.random.default_rng(seed)
    rr = np.where(rng.random(n) < 0.5, rng.uniform(300.0, 1500.0, n), rng.normal(850.0, 20.0, n))
    rr[rng.random(n) < 0.01] = 3000.0  # pauses
    gap = np.zeros(n)
    gap[rng.random(n) < 0.005] = rng.uniform(1.0, 60.0)  # bridged stretches, s
    return rr, np.cumsum(rr) / 1000 + np.cumsum(gap)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_spline_built_in_pieces_is_the_whole_spline(seed):
    from scipy import interpolate

    from devicepipe.heart.spectral import spline_on_grid

    rr, t = _irregular(20_000, seed)
    grid = np.arange(t[0], t[-1], 0.05)
    whole = interpolate.make_interp_spline(t, rr, k=2)(grid)
    # pieces shorter and longer than the halo; a last piece of two intervals (9,999); a tail of one
    # interval that joins the piece before (19,999)
    for piece in (1_000, 4_093, 9_999, 19_999):
        pieces = spline_on_grid(t, rr, grid, piece=piece)
        np.testing.assert_allclose(pieces, whole, rtol=1e-12, atol=1e-12 * np.abs(rr).max())  # (rounding near 0)
    # with no halo each piece's own end conditions show: the comparison above can fail
    assert not np.allclose(spline_on_grid(t, rr, grid, piece=1_000, halo=0), whole, rtol=1e-12, atol=0)


@pytest.mark.parametrize("n", [3, 4, 5, 9, 5_000])
def test_a_spline_of_one_piece_is_scipy_s_to_rounding_without_importing_it(n):
    import subprocess
    import sys

    from scipy import interpolate

    from devicepipe.heart.spectral import quadratic_spline, spline_on_grid

    rr, t = _irregular(n, 3)
    grid = np.arange(t[0] - 1.0, t[-1] + 1.0, 0.01)  # past either end too: the end pieces go on
    reference = interpolate.make_interp_spline(t, rr, k=2)
    scale = 1e-13 * np.abs(rr).max()  # (SciPy's banded solve and ours round apart: near 0, absolutely)
    np.testing.assert_allclose(spline_on_grid(t, rr, grid), reference(grid), rtol=1e-13, atol=scale)
    knots, coef = quadratic_spline(t, rr)
    np.testing.assert_array_equal(knots, reference.t)
    np.testing.assert_allclose(coef, reference.c, rtol=1e-13, atol=scale)
    if n == 5_000:  # the HRV of a run imports no SciPy (whose interpolation took 0.3-1.1 s to import)
        code = "import sys, numpy as np; from devicepipe.heart.spectral import hrv_frequency; " \
               "rr = np.full(600, 800.0) + np.sin(np.arange(600)); hrv_frequency(rr, np.cumsum(rr) / 1000); " \
               "print('scipy' in sys.modules)"  # fmt: skip
        assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_the_tridiagonal_solve_against_a_dense_one():
    from devicepipe.heart.spectral import tridiagonal_solve

    g = np.random.default_rng(5)
    for n in (1, 2, 3, 7, 64, 1000):
        below, above, rhs = g.normal(size=n), g.normal(size=n), g.normal(size=n)
        diagonal = np.abs(below) + np.abs(above) + g.uniform(0.5, 2.0, n)  # diagonally dominant
        dense = np.diag(diagonal) + np.diag(below[1:], -1) + np.diag(above[:-1], 1)
        np.testing.assert_allclose(tridiagonal_solve(below, diagonal, above, rhs), np.linalg.solve(dense, rhs),
                                   rtol=1e-10, atol=1e-12)  # fmt: skip


def test_a_million_beats_hold_what_one_piece_does_not_the_whole_spline():
    import tracemalloc

    from scipy import interpolate

    from devicepipe.heart.spectral import MAX_GRID, spline_on_grid

    rr, t = _irregular(1_000_000, 4)  # about ten days of beats
    grid = np.linspace(t[0], t[-1], MAX_GRID)
    spline_on_grid(t[:300], rr[:300], grid[:10])  # (imports out of the measure)
    tracemalloc.start()
    ours = spline_on_grid(t, rr, grid)
    peak = tracemalloc.get_traced_memory()[1] - ours.nbytes
    tracemalloc.reset_peak()
    whole = interpolate.make_interp_spline(t, rr, k=2)
    whole_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    probe = grid[:: MAX_GRID // 1000]
    np.testing.assert_allclose(ours[:: MAX_GRID // 1000], whole(probe), rtol=1e-12, atol=1e-12 * np.abs(rr).max())
    assert whole_peak > 50 * 2**20, f"{whole_peak / 2**20:.0f} MiB"  # the whole spline's solve
    assert peak < 20 * 2**20, f"{peak / 2**20:.0f} MiB"
