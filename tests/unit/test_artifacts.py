"""The artifact registry: each output file declared once, written from what a run made."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from devicepipe.artifacts import ARTIFACTS, Made, ScoredRows, caption, write_artifacts
from devicepipe.heart.rate import minute_rates
from devicepipe.pipelines import run_beats
from devicepipe.simulate import simulate_ecg, write_simulated_ecg


def test_each_file_is_declared_once_with_what_it_answers():
    names = [a.name for a in ARTIFACTS]
    assert len(names) == len(set(names)), names
    assert all(a.caption for a in ARTIFACTS)
    assert caption("latent.png").startswith("every beat's or window's code")
    assert caption("no-such-file.png") == ""
    kinds = {kind for a in ARTIFACTS for kind in a.makes}
    assert kinds == {"beats", "ecg", "score", "train", "series", "score-series"}


def test_minute_rates_by_hand():
    fs = 100.0
    peaks = np.arange(0, int(180 * fs), 80)  # one beat every 0.8 s (75 bpm) for three minutes
    rates = minute_rates(peaks, fs)
    assert rates.minute.tolist() == [0, 1, 2]
    # the first beat has no interval before it; 75 beats fall in each minute
    assert rates.beats.tolist() == [74, 75, 75]
    assert np.allclose(rates.median_bpm, 75.0) and np.allclose(rates.min_bpm, 75.0) and np.allclose(rates.max_bpm, 75)
    assert minute_rates(peaks[:1], fs).minute.size == 0


def test_minute_rates_equal_numpy_s_statistics_of_each_minute():
    """Against NumPy's median, min and max of each minute's rates, taken a minute at a time
    (odd and even counts, minutes with one beat, minutes without any)."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        fs = float(rng.choice([125.0, 250.0, 360.0, 1000.0]))
        peaks = np.cumsum(rng.integers(1, int(rng.integers(2, int(3 * fs))), int(rng.integers(2, 2000))))
        rates = minute_rates(peaks, fs)
        bpm = 60.0 * fs / np.diff(peaks.astype(np.float64))
        minute = np.floor(peaks[1:] / fs / 60.0).astype(np.int64)
        assert rates.minute.tolist() == np.unique(minute).tolist()
        for j, k in enumerate(rates.minute):
            own = bpm[minute == k]
            assert rates.beats[j] == own.size
            assert rates.median_bpm[j] == np.median(own)
            assert (rates.min_bpm[j], rates.max_bpm[j]) == (own.min(), own.max())


def test_a_beats_run_writes_each_minute_s_heart_rate(tmp_path):
    sim = simulate_ecg(150, 250, heart_rate_bpm=72, hrv=0.1, seed=4)
    path, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    result = run_beats(path, tmp_path / "run", device="cpu", figures=False)
    assert "heart_rate.csv" in result.files
    got = pd.read_csv(result.files["heart_rate.csv"])
    # independently, from beats.parquet: 60 / RR of each beat, grouped by the minute its R peak falls in
    beats = pd.read_parquet(tmp_path / "run" / "beats.parquet").dropna(subset=["rr_s"])
    beats["bpm"] = 60.0 / beats["rr_s"]
    expected = beats.groupby((beats["time_s"] // 60).astype(int))["bpm"].agg(["size", "median", "min", "max"])
    assert got["minute_start_s"].tolist() == [60.0 * m for m in expected.index]
    assert got["beats"].tolist() == expected["size"].tolist()
    for ours, theirs in (("median_bpm", "median"), ("min_bpm", "min"), ("max_bpm", "max")):
        assert np.allclose(got[ours], expected[theirs], rtol=1e-9), ours
    assert 60 < got["median_bpm"].median() < 85  # the simulated 72 bpm


def test_an_artifact_a_kind_does_not_make_is_not_written(tmp_path):
    made = Made("no-such-kind", tmp_path)
    assert write_artifacts(made) == {}
    with pytest.raises(KeyError):  # a kind that makes it, without what it is made from, says so
        write_artifacts(Made("series", tmp_path), only=("days.png",))


def test_the_training_figure_says_how_many_rows_the_model_learned_from(tmp_path):
    from types import SimpleNamespace

    from devicepipe.artifacts.figures import _rows

    zeros = np.zeros(5000)
    scores = ScoredRows(np.zeros((5000, 2)), zeros, zeros, zeros > 0)
    assert _rows(Made("ecg", tmp_path, scores)) == "5,000"  # no detector: every row
    sampled = SimpleNamespace(fit_rows_={"rows": 5000, "held_out": 500, "model": 2000})
    assert _rows(Made("ecg", tmp_path, scores, detector=sampled)) == "2,000 of 5,000"
    every = SimpleNamespace(fit_rows_={"rows": 4000, "held_out": 400, "model": 4000})  # usable beats only
    assert _rows(Made("ecg", tmp_path, scores, detector=every)) == "5,000"
