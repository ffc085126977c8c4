"""A model scoring rows it does not fit says so: the flagged share against the model's own, the
sampling rate, and the level of a series' values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

import devicepipe as dp
from devicepipe.pipelines.model_fit import (
    MAX_CHANCE,
    flag_share_warnings,
    own_flag_share,
    rate_fit_warnings,
    scale_fit_warnings,
)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    rows = (10_000 + 500 * rng.normal(size=(300, 24))).astype(np.float32)  # a load around 10,000 MW
    det = dp.BeatAnomalyDetector("mlp", epochs=2, device="cpu", threads=1, contamination=0.02, scaling="minmax")
    return det.fit(rows), rows


def test_the_model_s_own_share_is_its_training_rows_above_the_threshold(fitted):
    det, _ = fitted
    above = float(np.mean(det.train_scores_.numpy() > det.threshold_))
    n = det.train_scores_.numel()
    # at most the contamination share (less where no training row stands out), and never under one row's
    assert own_flag_share(det) == pytest.approx(max(above, 1 / n)) and above <= 0.02 + 1 / n


@pytest.mark.parametrize("k", [0, 20, 45, 200, 1000])
def test_many_more_flags_than_the_model_s_own_share_are_a_warning(fitted, k):
    det, _ = fitted
    n, own = 1000, own_flag_share(det)
    flags = np.zeros(n, bool)
    flags[:k] = True
    said = flag_share_warnings(det, flags)
    chance = binom.sf(k - 1, n, own)  # the exact chance of k or more flags at the model's own rate
    assert bool(said) == (k / n > max(3 * own, own + 0.05) and chance < MAX_CHANCE)
    assert bool(said) == (k >= 200)
    if said:
        assert f"{100 * k / n:.0f} % of the beats were flagged" in said[0]


def test_a_few_rows_are_never_a_warning(fitted):
    det, _ = fitted
    assert flag_share_warnings(det, np.ones(10, bool)) == []


def test_another_sampling_rate_is_said_and_the_same_is_not():
    assert rate_fit_warnings({"trained_at_hz": 360.0}, 360.0) == []
    assert rate_fit_warnings({}, 250.0) == []
    said = rate_fit_warnings({"trained_at_hz": 360.0}, 250.0)
    assert len(said) == 1 and "trained on recordings at 360 Hz and this one is at 250 Hz" in said[0]


def test_values_in_another_unit_are_said(fitted):
    det, rows = fitted
    assert scale_fit_warnings(det, rows[:50] * 1.5, "MW") == []  # a higher load, the same unit
    said = scale_fit_warnings(det, rows[:50] * 1000, "kW")
    assert len(said) == 1 and "about 1.01e+03 times those the model was trained on" in said[0]
    assert scale_fit_warnings(det, rows[:50] / 1000, "GW")
