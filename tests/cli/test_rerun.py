"""A run directory holds one run: a new run in it removes what the earlier one wrote and it did not."""

from __future__ import annotations

import json

import numpy as np
import wfdb
from typer.testing import CliRunner

from devicepipe.artifacts.write import remove_stale
from devicepipe.cli import app
from devicepipe.simulate import simulate_ecg, write_simulated_ecg

runner = CliRunner()


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def listed(out):
    return set(json.loads((out / "summary.json").read_text())["files"])


def test_a_re_run_on_another_recording_leaves_nothing_of_the_first(tmp_path):
    sim = simulate_ecg(60, 250, seed=3)
    signal = sim.signal.numpy()[:, None].astype("float64")
    wfdb.wrsamp("a", fs=250, units=["mV"], sig_name=["MLII"], p_signal=signal, fmt=["16"], write_dir=str(tmp_path))
    write_simulated_ecg(simulate_ecg(60, 250, seed=4), tmp_path / "b.csv")
    out = tmp_path / "out"
    run("beats", tmp_path / "a.hea", "--out", out)
    assert {"a.qrs", "excerpt.png", "quality.png"} <= listed(out)
    (out / "notes.txt").write_text("mine")  # a file no run wrote
    run("beats", tmp_path / "b.csv", "--out", out, "--sampling-rate", 250, "--no-figures")
    present = {p.name for p in out.iterdir()}
    assert "a.qrs" not in present and "excerpt.png" not in present and "b.qrs" in present
    assert present == listed(out) | {"notes.txt", "summary.json"}  # the second run's, and what the user put there


def test_a_score_in_a_training_run_s_directory_keeps_the_model(tmp_path):
    ecg, _ = write_simulated_ecg(simulate_ecg(90, 250, seed=5), tmp_path / "e.parquet")
    out = tmp_path / "run"
    run("ecg", ecg, "--out", out, "--epochs", 1, "--device", "cpu")
    assert {"model.pt", "embeddings.parquet", "training.png"} <= listed(out)
    run("score", ecg, "--model", out, "--out", out, "--device", "cpu")
    present = {p.name for p in out.iterdir()}
    assert "embeddings.parquet" not in present and "training.png" not in present  # the earlier run's
    assert {"model.pt", "checkpoint.pt"} <= present and "scores.parquet" in present  # what cost training stays


def test_only_plain_names_an_earlier_run_listed_are_removed(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    for name in ("old.png", "kept.png"):
        (out / name).write_text("x")
    (out / "sub").mkdir()
    removed = remove_stale(out, ["../outside.txt", "old.png", "kept.png", "sub", "model.pt", ""], ["kept.png"])
    assert removed == ["old.png"]
    assert outside.exists() and (out / "kept.png").exists() and (out / "sub").is_dir()
    assert np.array_equal(sorted(p.name for p in out.iterdir()), ["kept.png", "sub"])
