import numpy as np
import pytest
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import parse_duration
from devicepipe.simulate import simulate_ecg, simulate_load


@pytest.mark.parametrize("fs", [125, 250, 360, 1000])
@pytest.mark.parametrize("heart_rate", [45, 75, 140])
def test_beat_count_matches_duration_and_rate(fs, heart_rate):
    sim = simulate_ecg(120, fs, heart_rate_bpm=heart_rate, seed=3)
    assert sim.signal.shape == (120 * fs,)
    expected = 120 * heart_rate / 60
    assert abs(sim.r_peaks.numel() - expected) <= 0.04 * expected + 2
    rr = np.diff(sim.r_peaks.numpy()) / fs
    assert rr.mean() == pytest.approx(60 / heart_rate, rel=0.03)
    assert (np.diff(sim.r_peaks.numpy()) > 0).all() and int(sim.r_peaks.max()) < 120 * fs


@pytest.mark.parametrize("fs", [125, 250, 1000])
@pytest.mark.parametrize("inverted", [False, True])
def test_each_true_peak_is_the_local_extremum(fs, inverted):
    # noise off (wander on): the R peak must be the extreme sample within +-100 ms
    sim = simulate_ecg(60, fs, noise_mV=0.0, wander_mV=0.3, ectopic_rate=0.1, inverted=inverted, seed=5)
    x = sim.signal.numpy() * (-1 if inverted else 1)
    half = int(0.1 * fs)
    for r in sim.r_peaks.numpy():
        lo, hi = max(0, r - half), min(len(x), r + half + 1)
        assert x[r] == x[lo:hi].max()
    assert (sim.symbols == "V").any()


def test_ectopic_beats_are_premature_and_counted():
    sim = simulate_ecg(1800, 250, ectopic_rate=0.05, seed=1)
    v = np.flatnonzero(sim.symbols == "V")
    assert 0.03 < len(v) / len(sim.symbols) < 0.07
    rr = np.diff(sim.r_peaks.numpy())
    v = v[(v > 0) & (v < len(rr))]
    assert np.median(rr[v - 1]) < 0.75 * np.median(rr)  # the interval before a PVC is short
    assert np.median(rr[v]) > 1.25 * np.median(rr)  # and a compensatory pause follows


def test_deterministic_for_a_seed(device):
    a = simulate_ecg(30, 250, seed=7, ectopic_rate=0.05, device=device)
    b = simulate_ecg(30, 250, seed=7, ectopic_rate=0.05, device=device)
    c = simulate_ecg(30, 250, seed=8, device=device)
    assert torch.equal(a.signal, b.signal) and torch.equal(a.r_peaks, b.r_peaks)
    assert not torch.equal(a.signal[:1000], c.signal[:1000])


def test_noise_level_is_as_asked():
    clean = simulate_ecg(60, 500, noise_mV=0.0, seed=2).signal
    noisy = simulate_ecg(60, 500, noise_mV=0.1, seed=2).signal
    assert float((noisy - clean).std()) == pytest.approx(0.1, rel=0.02)


def test_simulate_errors():
    with pytest.raises(DevicepipeError, match="duration_s must be a finite, positive number"):
        simulate_ecg(0)
    with pytest.raises(DevicepipeError, match="ectopic_rate"):
        simulate_ecg(10, ectopic_rate=0.7)
    with pytest.raises(DevicepipeError, match="days must be at least 21"):
        simulate_load(3)
    with pytest.raises(DevicepipeError, match="n_anomalies must be within 0-16 for 30 days") as raised:
        simulate_load(30, n_anomalies=100)
    # on the command line, in its words (it had named the Python argument there too)
    assert "--anomalies must be within 0-16" in raised.value.cli_message
    assert raised.value.cli_message.endswith("ask for at most --anomalies 16, or more --days.")


def test_load_series_anomalies_stand_out():
    sim = simulate_load(120, n_anomalies=6, seed=4)
    assert sim.values.shape == (120 * 24,)
    steps = np.diff(sim.timestamps.view(np.int64))
    assert (steps == 3600 * 10**9).all()
    days = sim.values.numpy().reshape(120, 24)
    # an independent check: anomalous days are the farthest from the median profile of their weekday type
    weekday = (sim.timestamps[::24].astype("datetime64[D]").view(np.int64) + 3) % 7
    dist = np.empty(120)
    for is_weekend in (False, True):
        rows = (weekday >= 5) == is_weekend
        profile = np.median(days[rows], axis=0)
        dist[rows] = np.abs(days[rows] / profile - 1).mean(axis=1)
    day0 = sim.timestamps[0].astype("datetime64[D]")
    truth = (sim.anomalous_days - day0).astype(int)
    assert set(np.argsort(dist)[-6:]) == set(truth)
    assert sorted(set(sim.anomaly_kinds)) == ["holiday", "outage", "spike", "stuck"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("24h", 86400),
        ("30min", 1800),
        ("1h30m", 5400),
        ("90s", 90),
        ("1.5d", 129600),
        ("250ms", 0.25),
        (" 2 h ", 7200),
        ("1w", 604800),
        ("2w1d", 1296000),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)
    assert parse_duration(90) == 90.0  # a number, from the Python API, is seconds


@pytest.mark.parametrize("text", ["24x", "h", "", "-3h", "0s", "1h30"])
def test_parse_duration_rejects(text):
    with pytest.raises(DevicepipeError):
        parse_duration(text)


@pytest.mark.parametrize("text", ["1", "90", "2.5", " 30 "])
def test_a_written_duration_needs_its_unit(text):
    with pytest.raises(DevicepipeError, match=f"duration '{text}' has no unit; write e.g. '{text.strip()}s'"):
        parse_duration(text)


@pytest.mark.slow
def test_a_day_at_250_hz():
    sim = simulate_ecg(86400, 250, ectopic_rate=0.01)
    assert sim.signal.shape == (21_600_000,)
    assert abs(sim.r_peaks.numel() - 86400 * 70 / 60) < 0.03 * 86400 * 70 / 60


def test_amounts_that_are_no_amount_are_refused_not_written_as_a_signal():
    # an infinite mains amplitude had written a signal of NaN, an infinite noise one of -inf;
    # a variability of 5 had turned intervals back (60 beats where 70 were asked for)
    bad = {
        "noise_mV": [float("inf"), float("nan"), -0.1, 1e300],
        "wander_mV": [float("inf"), -1.0],
        "powerline_mV": [float("inf"), float("nan")],
        "hrv": [5.0, -1.0, float("nan")],
    }
    for name, values in bad.items():
        for value in values:
            with pytest.raises(DevicepipeError, match=rf"^simulate: {name} must be a finite number within 0-"):
                simulate_ecg(30, 250, **{name: value})
    with pytest.raises(DevicepipeError, match=r"powerline_hz must be a finite, positive number"):
        simulate_ecg(30, 250, powerline_hz=float("nan"))
    for value in (float("inf"), float("nan"), 2.0):
        with pytest.raises(DevicepipeError, match=r"^simulate: noise must be a finite number within 0-1, got"):
            simulate_load(30, noise=value)
    # the edges of each range are recordings still
    assert simulate_ecg(30, 250, hrv=0.5, noise_mV=0.0, wander_mV=0.0).signal.isfinite().all()
    assert simulate_load(30, noise=1.0).values.isfinite().all()
