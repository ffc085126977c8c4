"""The rows a beat model takes: levelled and lined up for the models that say so, as cut for older ones."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import torch

import devicepipe as dp
from devicepipe.learning.learn import LearnSettings
from devicepipe.pipelines import run_ecg, run_score
from devicepipe.pipelines.learning import beat_rows, model_rows
from devicepipe.signal.resample import resample_rows
from devicepipe.simulate import simulate_ecg, write_simulated_ecg


def test_model_rows_without_levelling_or_lining_up_are_the_beats_as_cut():
    sim = simulate_ecg(120, 250.0, seed=1)
    beats = dp.ecg_segment(sim.signal, dp.ecg_peaks(sim.signal, 250.0), 250.0, mode="centered")
    plain = model_rows(beats, sim.signal, 256, level=False, align=False)
    assert torch.equal(plain, resample_rows(beats.matrix, 256))
    # levelled and lined up: the same beats, moved and shifted by at most the wander under them
    made = model_rows(beats, sim.signal, 256)
    assert made.shape == plain.shape and not torch.equal(made, plain)


def test_an_older_model_scores_the_beats_as_cut(tmp_path):
    sim = simulate_ecg(240, 250.0, ectopic_rate=0.03, seed=2)
    write_simulated_ecg(sim, tmp_path / "e.csv")
    settings = LearnSettings(epochs=1, threads=1)
    run_ecg(tmp_path / "e.csv", tmp_path / "run", settings=settings, sampling_rate=250, device="cpu")
    new = dp.load_model(tmp_path / "run" / "model.pt", device="cpu")
    assert {"baseline", "aligned"} <= set(new.geometry_)
    # the same model as a release before levelling saved it: its geometry without the two keys
    old_geometry = {k: v for k, v in new.geometry_.items() if k not in ("baseline", "aligned")}
    new.save(tmp_path / "old.pt", geometry=old_geometry)
    run_score(tmp_path / "e.csv", tmp_path / "scored", model=tmp_path / "old.pt", sampling_rate=250, device="cpu")
    got = pq.read_table(tmp_path / "scored" / "scores.parquet").column("score").to_numpy()
    beats = dp.ecg_segment(sim.signal, dp.ecg_peaks(sim.signal, 250.0), 250.0, mode="centered")
    old = dp.load_model(tmp_path / "old.pt", device="cpu")
    expected = old.decision_function(beat_rows(beats.matrix, old.n_features_in_))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # and the model as saved scores the rows levelled and lined up
    run_score(tmp_path / "e.csv", tmp_path / "scored2", model=tmp_path / "run", sampling_rate=250, device="cpu")
    again = pq.read_table(tmp_path / "scored2" / "scores.parquet").column("score").to_numpy()
    made = beat_rows(model_rows(beats, sim.signal, new.n_features_in_), new.n_features_in_)
    np.testing.assert_allclose(again, new.decision_function(made), rtol=1e-5, atol=1e-6)
