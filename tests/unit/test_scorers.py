"""The scorers' registry: every entry keeps the contract, and a new scorer is one class plus one
registry entry, used by the estimator end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import devicepipe as dp
from devicepipe.anomaly import estimator
from devicepipe.cli.options import Scorer as ScorerChoice
from devicepipe.scorers import DEFAULT_SCORER, SCORER_KINDS, SCORERS, Fitting, Reference
from devicepipe.scorers.base import DistanceScorer


class FarthestOfNearest(DistanceScorer):
    """A scorer written for this test: the distance to the k-th nearest training row."""

    name = "kth"

    def scores(self, recon, data, ref, fitting=None):
        d = torch.cdist(data, ref.rows)
        if fitting is not None:  # a training row leaves itself out
            own = fitting.exclude >= 0
            d[own.nonzero()[:, 0], fitting.exclude[own]] = float("inf")
        return d.topk(ref.k, dim=1, largest=False).values[:, -1], dict(ref.calibration)

    def meaning(self, ref, rows, units):
        return f"a score is the distance from {rows} to its {ref.k}th nearest training row"


def test_every_scorer_is_registered_once_by_its_own_name_and_offered_on_the_command_line():
    assert SCORERS == tuple(SCORER_KINDS) and DEFAULT_SCORER == "local"
    assert all(kind.name == name for name, kind in SCORER_KINDS.items())
    assert [c.value for c in ScorerChoice] == list(SCORERS)
    with pytest.raises(TypeError):
        SCORER_KINDS["x"] = SCORER_KINDS["knn"]  # the registry is read-only


@pytest.mark.parametrize("name", SCORERS)
def test_each_scorer_scores_every_row_and_fits_the_calibration_it_later_reads(name):
    kind = SCORER_KINDS[name]
    g = torch.Generator().manual_seed(0)
    data = torch.randn(60, 32, generator=g)
    recon = torch.rand(60, generator=g) + 0.1
    ref = Reference(data if kind.uses_reference else None, 3 if kind.uses_reference else None)
    fitting = Fitting(torch.arange(60), torch.arange(50))
    fitted, calibration = kind.scores(recon, data, ref, fitting)
    assert fitted.shape == (60,) and bool(torch.isfinite(fitted).all())
    assert bool(calibration) == (kind.z_scores or False)
    again, same = kind.scores(recon, data + 5.0, Reference(ref.rows, ref.k, calibration))
    assert same == calibration and again.shape == (60,)
    if kind.uses_reference:  # rows moved away from the training rows score higher
        assert float(again.mean()) > float(fitted.mean())
    else:  # the reconstruction error is the score
        assert torch.equal(again, recon) and torch.equal(fitted, recon)
    assert kind.meaning(ref, "a beat", "mV").startswith("a score is")


def test_a_new_scorer_is_one_class_and_one_registry_entry(monkeypatch, tmp_path):
    monkeypatch.setattr(estimator, "SCORER_KINDS", {**SCORER_KINDS, "kth": FarthestOfNearest()})
    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 16)).astype(np.float32)
    det = dp.BeatAnomalyDetector("mlp", scorer="kth", neighbours=4, epochs=2, device="cpu", scaling="none")
    det.fit(x)
    probe = x[:10] + 2.0
    d = np.sqrt(((probe[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(det.decision_function(probe), np.sort(d, 1)[:, 3], rtol=1e-5)
    train = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(train, np.inf)
    np.testing.assert_allclose(det.decision_scores_, np.sort(train, 1)[:, 3], rtol=1e-5)
    assert det.score_meaning() == "a score is the distance from a row to its 4th nearest training row"
    assert det.scorer_summary()["neighbours"] == 4
    det.save(tmp_path / "m.pt")
    again = dp.load_model(tmp_path / "m.pt", device="cpu")
    np.testing.assert_array_equal(again.decision_function(probe), det.decision_function(probe))


def test_the_outlier_fence_is_tukeys_far_out_fence():
    from devicepipe.scorers.neighbours import outlier_fence

    rng = np.random.default_rng(0)
    z = rng.normal(size=5001)
    q1, q3 = np.percentile(z, [25, 75])
    assert outlier_fence(torch.tensor(z), log=False) == pytest.approx(q3 + 3 * (q3 - q1), rel=1e-9)
    d = np.exp(z)  # distances: the fence of their logs, back on their own scale
    assert outlier_fence(torch.tensor(d)) == pytest.approx(np.exp(q3 + 3 * (q3 - q1)), rel=1e-9)


def test_rows_with_nothing_unusual_are_not_flagged_by_the_share_alone():
    rng = np.random.default_rng(1)
    t = np.linspace(0, 1, 64)
    normal = np.sin(2 * np.pi * t)[None, :] * rng.normal(1.0, 0.05, (1500, 1)) + rng.normal(0, 0.05, (1500, 64))
    det = dp.BeatAnomalyDetector(epochs=1, device="cpu", seed=0, threads=1).fit(normal.astype(np.float32))
    # a 1 % share alone would flag 15 rows of the same shape; the fence flags under half as many
    assert det.threshold_ > np.quantile(det.decision_scores_, 0.99)
    assert det.labels_.sum() < 15 / 2
    # 15 rows of another shape among them are flagged, every one
    odd = np.sign(np.sin(2 * np.pi * 3 * t))[None, :] + rng.normal(0, 0.05, (15, 64))
    both = np.concatenate([normal, odd]).astype(np.float32)
    det = dp.BeatAnomalyDetector(epochs=1, device="cpu", seed=0, threads=1).fit(both)
    assert det.labels_[-15:].all() and det.labels_[:-15].sum() < 15 / 2
