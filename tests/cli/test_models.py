"""Models that outlive a run: ecg -> score, train on a population -> score, torchrun with two gloo processes."""

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

import devicepipe as dp
from devicepipe.cli import app
from devicepipe.simulate import write_simulated_ecg

ENV = {**os.environ, "DEVICEPIPE_THREADS": "1", "OMP_NUM_THREADS": "1"}


def run(*args: str) -> subprocess.CompletedProcess:
    """The command, in this process (as a finished process's result: its status, stdout and stderr)."""
    r = CliRunner().invoke(app, list(args), env={"DEVICEPIPE_THREADS": "1", "OMP_NUM_THREADS": "1"})
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def run_process(*args: str) -> subprocess.CompletedProcess:
    """The command in a process of its own (beside ``torchrun``'s, to compare with them)."""
    return subprocess.run([sys.executable, "-m", "devicepipe", *args], capture_output=True, text=True, env=ENV)


def torchrun(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    return subprocess.run([*command, "-m", "devicepipe", *args], capture_output=True, text=True, env=ENV)


@pytest.fixture(scope="module")
def population(tmp_path_factory) -> Path:
    """Three 3-minute simulated ECGs at 250 Hz of normal beats, and a fourth apart with about 3 % ventricular
    ectopic beats."""
    root = tmp_path_factory.mktemp("population")
    for i in range(4):
        ectopic = 0.03 if i == 3 else 0.0
        sim = dp.simulate_ecg(180.0, 250.0, heart_rate_bpm=70 + 5 * i, ectopic_rate=ectopic, noise_mV=0.02, seed=i)
        folder = root / ("pop" if i < 3 else "new")
        write_simulated_ecg(sim, folder / f"rec{i}.parquet")
    return root


def weights(path: Path) -> list[dict[str, torch.Tensor]]:
    return torch.load(path, weights_only=True)["members"]


def assert_same_weights(a: Path, b: Path, atol: float = 1e-5) -> None:
    wa, wb = weights(a), weights(b)
    assert len(wa) == len(wb)
    for ma, mb in zip(wa, wb, strict=True):
        assert ma.keys() == mb.keys()
        for k in ma:
            torch.testing.assert_close(ma[k], mb[k], atol=atol, rtol=1e-4)


def test_score_reproduces_the_runs_own_scores(population, tmp_path):
    rec = population / "pop" / "rec0.parquet"
    r = CliRunner().invoke(app, ["ecg", str(rec), "--out", str(tmp_path / "run"), "--epochs", "4", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "run" / "model.pt").is_file()
    s = run("score", str(rec), "--model", str(tmp_path / "run"), "--out", str(tmp_path / "s"), "--device", "cpu")
    assert s.returncode == 0, s.stderr
    trained = pd.read_parquet(tmp_path / "run" / "embeddings.parquet")
    scored = pd.read_parquet(tmp_path / "s" / "scores.parquet")
    np.testing.assert_array_equal(scored["peak"], trained["peak"])
    np.testing.assert_array_equal(scored["score"], trained["score"])  # a new process, the same numbers
    np.testing.assert_array_equal(scored["flag"], trained["flag"])
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["threshold"] == json.loads((tmp_path / "run" / "summary.json").read_text())["threshold"]
    assert summary["counts"]["flagged"] == int(trained["flag"].sum())
    assert {"report.html", "scores.png", "beats.parquet", "rec0.qrs"} <= set(summary["files"])
    # a reference without labels is refused before anything is read or written (it failed inside
    # the run, with "label_beats(): 140 reference beats but 1 labels")
    (tmp_path / "peaks.csv").write_text("sample\n100\n200\n")
    refused = run("score", str(rec), "--model", str(tmp_path / "run"), "--out", str(tmp_path / "s2"),
                  "--reference", str(tmp_path / "peaks.csv"))  # fmt: skip
    assert refused.returncode == 2 and "peaks.csv has no beat labels; score needs labelled beats" in refused.stderr
    assert not (tmp_path / "s2").exists()


def test_population_model_scores_new_recordings(population, tmp_path):
    t = run("train", str(population / "pop"), "--out", str(tmp_path / "m"), "--epochs", "30", "--device", "cpu")
    assert t.returncode == 0, t.stderr
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    per = pd.read_parquet(tmp_path / "m" / "recordings.parquet")
    assert summary["recordings"]["used"] == 3 and len(per) == 3
    assert summary["counts"]["beats"] == int(per["beats"].sum()) > 500
    new = population / "new" / "rec3.parquet"
    truth = population / "new" / "rec3.truth.csv"
    model = str(tmp_path / "m" / "model.pt")
    s = run("score", str(new), "-m", model, "-o", str(tmp_path / "s"), "--reference", str(truth))
    assert s.returncode == 0, s.stderr
    aami = json.loads((tmp_path / "s" / "summary.json").read_text())["reference"]["aami"]
    truth_table = pd.read_csv(truth)
    assert aami["V"]["beats"] <= int((truth_table["symbol"] == "V").sum())
    # the ectopic beats of a recording the model never saw stand out against the normal ones
    assert aami["V"]["flag_rate"] > 0.8 and aami["N"]["flag_rate"] < 0.05, aami
    assert "flag rate by AAMI class: N" in s.stdout


@pytest.mark.slow  # four commands end to end, two of them on folders; CI runs it
def test_score_many_recordings_and_train_on_a_beats_run(population, tmp_path):
    r = CliRunner().invoke(app, ["ecg", str(population / "new" / "rec3.parquet"), "-o", str(tmp_path / "run"),
                                 "--epochs", "3", "--device", "cpu"])  # fmt: skip
    assert r.exit_code == 0, r.output
    s = run("score", str(population / "pop"), "-m", str(tmp_path / "run"), "-o", str(tmp_path / "ds"), "--workers", "0")
    assert s.returncode == 0, s.stderr
    index = pd.read_parquet(tmp_path / "ds" / "index.parquet")
    assert list(index["status"]) == ["ok"] * 3
    for row in index.itertuples():
        scores = pd.read_parquet(tmp_path / "ds" / row.run / "scores.parquet")
        assert int(scores["flag"].sum()) == row.flagged
    b = run("beats", str(population / "pop"), "-o", str(tmp_path / "b"), "--workers", "0", "--no-figures")
    assert b.returncode == 0, b.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # every warning shown, however often it was before in this process
        t = run("train", str(tmp_path / "b"), "-o", str(tmp_path / "m"), "--epochs", "2", "--device", "cpu")
    assert t.returncode == 0, t.stderr
    assert "warning" not in t.stderr.lower(), t.stderr  # torch's non-writable array warning among them
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert summary["recordings"]["described"].startswith("the beats of dataset run")
    assert summary["seconds"]["detect"] < 1.0  # the R peaks were read back, not detected again


def test_bad_models_are_one_line_and_write_nothing(population, tmp_path):
    rec = str(population / "pop" / "rec0.parquet")
    (tmp_path / "empty").mkdir()
    truncated = tmp_path / "t.pt"
    truncated.write_bytes(b"PK\x03\x04 not a whole file")
    load = tmp_path / "load.csv"
    assert run("simulate", "load", "--out", str(load), "--days", "40").returncode == 0
    series = run("series", str(load), "-c", "load_MW", "-o", str(tmp_path / "series"), "--epochs", "2", "-d", "cpu")
    assert series.returncode == 0, series.stderr
    cases = {
        str(tmp_path / "empty"): "no model in",
        str(truncated): "cannot read model",
        str(tmp_path / "series"): "windows of a load series",
        str(tmp_path / "missing"): "does not exist",
    }
    for model, message in cases.items():
        out = tmp_path / "out"
        r = run("score", rec, "--model", model, "--out", str(out))
        assert r.returncode == 2, (model, r.stderr)
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Traceback" not in r.stderr and not out.exists()
    noise = tmp_path / "noise.npy"
    np.save(noise, np.random.default_rng(0).normal(size=30_000).astype(np.float32))
    r = run("train", str(noise), "--sampling-rate", "250", "--out", str(tmp_path / "noisy"))
    assert r.returncode == 2 and not (tmp_path / "noisy").exists(), r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no whole beat was cut from noise.npy" in lines[0] and "--sampling-rate" in lines[0]


@pytest.mark.slow  # starts two torch.distributed processes; CI runs it
def test_two_gloo_processes_train_the_weights_of_one(population, tmp_path):
    common = [str(population / "pop"), "--epochs", "3", "--device", "cpu", "--batch-size", "64"]
    one = run_process("train", *common, "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    two = torchrun("train", *common, "--out", str(tmp_path / "two"))
    assert two.returncode == 0, two.stderr
    assert_same_weights(tmp_path / "one" / "model.pt", tmp_path / "two" / "model.pt")
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["distributed"] == {"backend": "gloo", "world_size": 2, "how": "DistributedDataParallel"}
    assert json.loads((tmp_path / "one" / "summary.json").read_text())["distributed"] is None


@pytest.mark.slow  # starts two torch.distributed processes; CI runs it
def test_an_ensemble_divided_over_two_ranks_equals_the_whole(population, tmp_path):
    common = [str(population / "pop"), "--epochs", "3", "--device", "cpu", "--ensemble", "3"]
    one = run_process("train", *common, "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    two = torchrun("train", *common, "--out", str(tmp_path / "two"))
    assert two.returncode == 0, two.stderr
    assert len(weights(tmp_path / "two" / "model.pt")) == 3
    assert_same_weights(tmp_path / "one" / "model.pt", tmp_path / "two" / "model.pt")


@pytest.mark.slow  # starts two torch.distributed processes; CI runs it
def test_resume_under_two_ranks(population, tmp_path):
    common = [str(population / "pop"), "--device", "cpu", "--batch-size", "64"]
    whole = run_process("train", *common, "--epochs", "4", "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    first = torchrun("train", *common, "--epochs", "2", "--out", str(tmp_path / "parts"))
    assert first.returncode == 0, first.stderr
    assert torch.load(tmp_path / "parts" / "checkpoint.pt", weights_only=True)["epoch"] == 2
    shutil.copy(tmp_path / "parts" / "model.pt", tmp_path / "after2.pt")
    second = torchrun("train", *common, "--epochs", "4", "--resume", "--out", str(tmp_path / "parts"))
    assert second.returncode == 0, second.stderr
    assert torch.load(tmp_path / "parts" / "checkpoint.pt", weights_only=True)["epoch"] == 4
    assert_same_weights(tmp_path / "whole" / "model.pt", tmp_path / "parts" / "model.pt")
    with pytest.raises(AssertionError):  # the check can fail: two more epochs changed the weights
        assert_same_weights(tmp_path / "after2.pt", tmp_path / "parts" / "model.pt")


@pytest.mark.parametrize("ensemble", [1, 2])
def test_beats_beyond_the_memory_budget_are_streamed_with_the_same_result(population, tmp_path, ensemble):
    settings = dp.pipelines.LearnSettings(epochs=3, ensemble=ensemble, threads=1)
    held = dp.run_train(population / "pop", tmp_path / "held", settings=settings, device="cpu")
    streamed = dp.run_train(population / "pop", tmp_path / "streamed", settings=settings, device="cpu",
                            memory_budget=10_000)  # fmt: skip
    assert held.summary["streamed"]["from_host"] is False
    assert streamed.summary["streamed"]["from_host"] is True
    for a, b in zip(weights(tmp_path / "held" / "model.pt"), weights(tmp_path / "streamed" / "model.pt"), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)  # the same batches, the same arithmetic
    assert held.summary["threshold"] == streamed.summary["threshold"]


@pytest.mark.cuda
def test_streaming_to_a_gpu_equals_holding_the_beats_there(population, tmp_path):
    settings = dp.pipelines.LearnSettings(epochs=3, threads=1)
    dp.run_train(population / "pop", tmp_path / "held", settings=settings, device="cuda")
    s = dp.run_train(population / "pop", tmp_path / "streamed", settings=settings, device="cuda", memory_budget=10_000)
    assert s.summary["streamed"]["from_host"] is True
    assert_same_weights(tmp_path / "held" / "model.pt", tmp_path / "streamed" / "model.pt", atol=1e-6)


def test_train_min_quality_leaves_poor_beats_out(population, tmp_path):
    # a copy of the population with 40 s of heavy noise over the middle of one recording
    from devicepipe.io import read_series, write_parquet

    pop = tmp_path / "pop"
    shutil.copytree(population / "pop", pop)
    rec = read_series(pop / "rec1.parquet")
    x = rec.samples.clone()
    x[60 * 250 : 100 * 250] += 1.5 * torch.randn(40 * 250, generator=torch.Generator().manual_seed(0))
    (pop / "rec1.parquet").unlink()
    write_parquet({"ecg": x}, pop / "rec1.parquet", sampling_rate=250)
    common = ["--epochs", "2", "--device", "cpu"]
    plain = CliRunner().invoke(app, ["train", str(pop), "-o", str(tmp_path / "a"), *common])
    assert plain.exit_code == 0, plain.output
    picky = CliRunner().invoke(app, ["train", str(pop), "-o", str(tmp_path / "b"), *common, "--min-quality", "0.5"])
    assert picky.exit_code == 0, picky.output
    a = pd.read_parquet(tmp_path / "a" / "recordings.parquet").set_index("path")
    b = pd.read_parquet(tmp_path / "b" / "recordings.parquet").set_index("path")
    # the same beats were cut: those trained on plus those left out
    assert (b["beats"] + b["poor_left_out"]).equals(a["beats"]) and (a["poor_left_out"] == 0).all()
    noisy = b.loc[str(pop / "rec1.parquet")]
    assert noisy["poor_left_out"] >= 40 * 70 / 60 * 0.8  # about 47 beats lie in the noise
    assert b.drop(index=str(pop / "rec1.parquet"))["poor_left_out"].max() <= 2  # the clean recordings keep theirs
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["quality"]["left_out_of_training"] == int(b["poor_left_out"].sum())
    assert summary["counts"]["beats"] == int(b["beats"].sum())
    assert "left out of training" in " ".join(picky.stdout.split())
    bad = CliRunner().invoke(app, ["train", str(pop), "-o", str(tmp_path / "c"), "--min-quality", "1.5"])
    assert bad.exit_code == 2 and "--min-quality must be a correlation between -1 and 1" in bad.output
    assert not (tmp_path / "c").exists()
    strict = CliRunner().invoke(
        app, ["train", str(pop / "rec0.parquet"), "-o", str(tmp_path / "d"), "--min-quality", "0.9999"]
    )
    assert strict.exit_code == 2 and "reaches --min-quality 0.9999; lower --min-quality" in strict.output
    assert not (tmp_path / "d").exists()
