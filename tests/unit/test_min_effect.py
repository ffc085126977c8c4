"""The least effect of a flag: a rare but small difference (ordinary variation on a quiet recording)
is not flagged; a beat of another shape still is."""

import numpy as np
import pytest
import torch

import devicepipe as dp
from devicepipe.anomaly import load_model
from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import label_beats
from devicepipe.pipelines.learning import model_rows
from devicepipe.scorers.neighbours import MIN_EFFECT, typical_size
from devicepipe.signal.scale import StandardScaler


def rows_of(signal: torch.Tensor, fs: float) -> tuple[torch.Tensor, object]:
    """The beats ``(n, 256)`` of ``signal`` as ``ecg`` cuts, lines up and standardises them, and the beats."""
    beats = dp.ecg_segment(signal, dp.ecg_peaks(signal, fs), fs, mode="centered")
    matrix = model_rows(beats, signal, 256, align=True)
    scaler = StandardScaler().fit(matrix.reshape(-1))
    return scaler.transform(matrix.reshape(-1)).reshape(matrix.shape), beats


def detector(**kw) -> dp.BeatAnomalyDetector:
    return dp.BeatAnomalyDetector(epochs=1, device="cpu", seed=0, threads=1, width=256, scaling="none", **kw)


def test_typical_size_by_hand():
    rows = torch.tensor([[1.0, 3.0], [0.0, 4.0], [2.0, 2.0], [5.0, 9.0]])
    # each row less its own mean: (-1, 1), (-2, 2), (0, 0), (-2, 2); norms sqrt 2, sqrt 8, 0, sqrt 8
    assert typical_size(rows) == pytest.approx((np.sqrt(2) + np.sqrt(8)) / 2)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_quiet_recording_s_ordinary_variation_is_not_flagged(seed):
    # 10 minutes of sinus rhythm at 0.01 mV of noise: the simulator varies each beat's amplitude by
    # up to 5 % and its width by up to 3 %. The robust z-scores, scaled by so little noise, put the
    # extremes of that variation above the threshold; their difference is under 15 % of a beat.
    sim = dp.simulate_ecg(600.0, 250.0, noise_mV=0.01, seed=seed)
    rows, _ = rows_of(sim.signal, 250.0)
    threshold_alone = detector(min_effect=0).fit(rows)
    above = threshold_alone.details_.flags.numpy()
    assert above.sum() >= 3
    assert threshold_alone.details_.effects.numpy()[above].max() < MIN_EFFECT
    default = detector().fit(rows)
    assert default.labels_.sum() == 0
    assert np.array_equal(default.decision_scores_, threshold_alone.decision_scores_)  # the scores are unchanged


def test_ventricular_beats_on_a_quiet_recording_keep_their_flags():
    sim = dp.simulate_ecg(600.0, 250.0, noise_mV=0.01, ectopic_rate=0.01, seed=0)
    rows, beats = rows_of(sim.signal, 250.0)
    labels = np.asarray(label_beats(sim.r_peaks, np.asarray(sim.symbols), beats.peaks, 250.0))
    default, threshold_alone = detector().fit(rows), detector(min_effect=0).fit(rows)
    v = labels == "V"
    assert v.sum() >= 5 and default.details_.effects.numpy()[v].min() > 2 * MIN_EFFECT
    assert np.array_equal(default.labels_, threshold_alone.labels_)
    assert default.labels_[v].sum() >= 5


def test_min_effect_is_checked_said_and_saved(tmp_path):
    for bad in (-0.1, True, "large", float("nan")):
        with pytest.raises(DevicepipeError, match="min_effect must be a number >= 0"):
            detector(min_effect=bad).fit(np.random.default_rng(0).normal(size=(60, 256)).astype(np.float32))
    rows = np.random.default_rng(1).normal(size=(80, 256)).astype(np.float32)
    det = detector(min_effect=0.5).fit(rows)
    assert "at least 50 % of a typical row's shape" in det.threshold_rule
    assert "typical row" not in detector(scorer="knn").fit(rows).threshold_rule  # it measures no effect
    assert detector(scorer="knn").fit(rows).details_.effects is None
    det.save(tmp_path / "m.pt")
    again = load_model(tmp_path / "m.pt")
    assert again.min_effect == 0.5
    new = np.random.default_rng(2).normal(size=(30, 256)).astype(np.float32)
    assert torch.equal(again.score_details(new).flags, det.score_details(new).flags)
    assert torch.equal(again.score_details(new).effects, det.score_details(new).effects)


def test_the_extremes_figure_tells_a_flag_from_a_score_above_the_threshold_too_small_to_flag():
    from devicepipe.plots import plot_extremes

    rows = np.zeros((4, 8))
    scores = np.array([9.0, 8.0, 1.0, 0.5])
    flags = np.array([True, False, False, False])  # the second is above the threshold, but small
    fig = plot_extremes(rows, rows, scores, k=2, threshold=5.0, flags=flags)
    titles = [ax.get_title() for ax in fig.axes[:2]]
    assert titles[0].endswith("score 9 (flagged)") and titles[1].endswith("score 8 (above; too small to flag)")
    fig = plot_extremes(rows, rows, scores, k=2, threshold=5.0)  # no flags given: by the score
    assert [ax.get_title().endswith("(flagged)") for ax in fig.axes[:2]] == [True, True]
