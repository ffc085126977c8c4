"""Regression floors of the learned anomaly scores on real labelled beats.

Measured when set (benchmarks/learning_eval.py): ECG5000 test AUC 0.9909 (one VAE, latent 4,
300 epochs, seed 0) and 0.9916 (5-member vmap ensemble); targets 0.97 and 0.98. With the
pipelines' default early stopping (patience 20, at most 300 epochs): 0.9831, 0.9859, 0.9805
for seeds 0, 1, 2; target 0.98.
"""

import json

from evaluation import ecg5000_auc
from typer.testing import CliRunner

from conftest import require_data
from devicepipe.cli import app


def test_ecg5000_one_vae_floor():
    result = ecg5000_auc(require_data("ecg5000"), members=1, epochs=300, latent=4, seed=0)
    assert result.n_train == 292 and result.n_test == 4499
    assert result.auc >= 0.97, result


def test_ecg5000_one_vae_with_early_stopping():
    for seed in (0, 1, 2):
        result = ecg5000_auc(require_data("ecg5000"), members=1, epochs=None, latent=4, seed=seed)
        assert result.epochs < 300  # it stopped by itself
        assert result.auc >= 0.98, (seed, result)


def test_ecg5000_ensemble_floor():
    assert ecg5000_auc(require_data("ecg5000"), members=5, epochs=300, latent=4, seed=0).auc >= 0.98


def test_ecg_command_on_mitdb(tmp_path):
    record = require_data("mitdb/100")
    result = CliRunner().invoke(
        app, ["ecg", str(record), "--out", str(tmp_path / "r"), "--epochs", "5", "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["counts"]["beats_found"] == 2273 and summary["sampling_rate_hz"] == 360


def test_series_command_on_aep(tmp_path):
    path = require_data("electricity/AEP_hourly.csv")
    result = CliRunner().invoke(
        app, ["series", str(path), "--out", str(tmp_path / "r"), "-c", "AEP_MW", "--epochs", "20", "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    # 4 duplicate hours averaged; the 27 one-hour gaps filled within their days; the last day has one hour only
    assert s["time"]["n_duplicates"] == 4 and s["windows"]["filled_slots"] == 27 + 1
    assert s["windows"]["dropped"] == ["2018-08-03T00:00:00"]
    assert s["windows"]["used"] == 5054
    flagged = [f["start"][:10] for f in s["flagged"]]
    assert 25 <= len(flagged) <= 100  # the 99th percentile of the training days' scores
    # a data error found by reading the file: 10/20/2008 14:00 reads 25695 MW between hours of about 16000
    assert "2008-10-20" in flagged
