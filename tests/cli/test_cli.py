import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from devicepipe.cli import app
from devicepipe.io import read_series

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def assert_user_error(result, pattern):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("devicepipe: error: ")
    assert pattern in lines[0]
    assert "Traceback" not in result.output


def test_info_table_and_json():
    result = run("info")
    assert result.exit_code == 0
    assert "PyTorch" in result.stdout and "Optional libraries" in result.stdout
    result = run("info", "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert {"python", "torch", "gpus", "cpu", "libraries"} <= set(report)


def test_simulate_ecg_csv_and_read_back(tmp_path):
    out = tmp_path / "ecg.csv"
    result = run("simulate", "ecg", "--duration", "2min", "--sampling-rate", 360, "--ectopic-rate", 0.05, "--out", out)
    assert result.exit_code == 0, result.output
    with open(tmp_path / "ecg.truth.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    truth = {"sample": np.array([int(r["sample"]) for r in rows]), "symbol": [r["symbol"] for r in rows]}
    rec = read_series(out, sampling_rate=360)
    assert rec.n_samples == 120 * 360
    assert 100 < len(rows) < 180  # about 70 bpm for two minutes
    assert set(truth["symbol"]) <= {"N", "V"}
    # the file holds the signal: each true peak is near the local maximum of what was written
    x = rec.samples.numpy()
    for s in truth["sample"][:20]:
        assert abs(int(np.argmax(x[max(0, s - 20) : s + 21])) - min(s, 20)) <= 3
    result = run("read", out, "--sampling-rate", 360, "--json")
    assert result.exit_code == 0
    summary = json.loads(result.stdout)
    assert summary["n_samples"] == 120 * 360 and summary["duration_s"] == pytest.approx(120)


def test_simulate_ecg_parquet_keeps_the_rate(tmp_path):
    out = tmp_path / "e.parquet"
    assert (
        run("simulate", "ecg", "--duration", "30s", "--sampling-rate", 500, "--inverted", "--out", out).exit_code == 0
    )
    rec = read_series(out)
    assert rec.sampling_rate == 500 and float(rec.samples.min()) < -0.8  # inverted: deep negative R waves


def test_simulate_load_and_read_with_time_column(tmp_path):
    out = tmp_path / "load.csv"
    result = run("simulate", "load", "--days", 30, "--anomalies", 2, "--out", out)
    assert result.exit_code == 0, result.output
    rec = read_series(out, "load_MW", time_column="Datetime")
    assert rec.n_samples == 30 * 24 and rec.time_report.regular
    result = run("read", out, "--time-column", "Datetime", "-c", "load_MW")
    assert result.exit_code == 0 and "duplicate timestamps: 0" in result.stdout


def test_demo_runs(tmp_path):
    result = run("demo", "--out", tmp_path / "d", "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "d" / "ecg.parquet").exists() and (tmp_path / "d" / "ecg.truth.csv").exists()
    assert "450,000 samples" in result.stdout


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["read", "{tmp}/missing.csv"], "file not found"),
        (["read", "{tmp}/x.csv", "--device", "gpu"], "unknown device 'gpu'; use 'cuda:0'"),
        (["read", "{tmp}/x.csv", "-c", "nope"], "column 'nope' not found"),
        (["read", "{tmp}/x.csv", "--nan", "bogus"], "'bogus' is not one of"),
        (["simulate", "ecg", "--duration", "24x", "--out", "{tmp}/o.csv"], "cannot read duration '24x'"),
        (["simulate", "ecg", "--out", "{tmp}/o.xlsx"], "use a .csv, .parquet or .npy"),
        (["simulate", "ecg", "--out", "{tmp}/o.csv", "--sampling-rate", "5"], "--sampling-rate"),
        (["simulate", "load", "--out", "{tmp}/o.npy"], "has timestamps"),
        (["read"], "Missing argument"),
        (["nonsense"], "No such command"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, pattern):
    (tmp_path / "x.csv").write_text("a\n1\n2\n")
    result = run(*[a.format(tmp=tmp_path) for a in args])
    assert_user_error(result, pattern)
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "o.truth.csv").exists()


def test_cuda_request_without_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    (tmp_path / "x.csv").write_text("a\n1\n")
    assert_user_error(run("read", tmp_path / "x.csv", "--device", "cuda"), "--device cpu")


def test_module_entry_point():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "devicepipe", "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "simulate" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "devicepipe", "read", "/nonexistent.csv"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_beats_on_a_simulated_csv(tmp_path):
    import pyarrow.parquet as pq

    src = tmp_path / "ecg.csv"
    assert run("simulate", "ecg", "--duration", "3min", "--ectopic-rate", 0.02, "--out", src).exit_code == 0
    out = tmp_path / "run"
    result = run("beats", src, "--sampling-rate", 250, "--out", out, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert "beats found" in result.stdout
    table = pq.read_table(out / "beats.parquet")
    assert table.column_names == ["peak", "time_s", "rr_s", "kept"]
    with open(tmp_path / "ecg.truth.csv", newline="") as fh:
        truth = [int(r["sample"]) for r in csv.DictReader(fh)]
    from devicepipe.ecg import evaluate_beats

    assert evaluate_beats(truth, table.column("peak").to_numpy(), 250, n_samples=180 * 250).f1 >= 0.99
    matrix = np.load(out / "beat_matrix.npy")
    assert matrix.shape == (int(np.sum(table.column("kept").to_numpy())), 256)
    for name in ("excerpt.png", "intervals.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_beats"] == table.num_rows and summary["sampling_rate_hz"] == 250


def test_beats_with_reference_on_mitdb(tmp_path):
    from conftest import require_data

    record = require_data("mitdb/100")
    result = run("beats", record, "--out", tmp_path / "r", "--reference", record.with_suffix(".atr"), "--no-figures")
    assert result.exit_code == 0, result.output
    assert "F1 1.0000" in result.stdout or "F1 0.99" in result.stdout
    assert not (tmp_path / "r" / "excerpt.png").exists()


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["beats", "{tmp}/x.csv", "--out", "{tmp}/o"], "sampling rate of x.csv is unknown"),
        (["beats", "{tmp}/x.csv", "--out", "{tmp}/o", "--sampling-rate", "250"], "at least two seconds"),
        (["beats", "{tmp}/x.csv", "--out", "{tmp}/o", "--method", "pan"], "'pan' is not one of"),
        (["beats", "{tmp}/x.csv", "--out", "{tmp}/o", "--channel", "zz", "--sampling-rate", "1"], "column 'zz'"),
    ],
)
def test_beats_bad_input_writes_nothing(tmp_path, args, pattern):
    (tmp_path / "x.csv").write_text("a\n1\n2\n")
    assert_user_error(run(*[a.format(tmp=tmp_path) for a in args]), pattern)
    assert not (tmp_path / "o").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o.")]


def test_interop_matrix_small():
    result = run("interop", "--size", 100_000, "--repeats", 1, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    pairs = {(p["source"], p["target"]): p["status"] for p in report["pairs"]}
    for a in ("torch", "numpy", "pyarrow", "pandas", "polars"):
        for b in ("torch", "numpy", "pyarrow", "pandas", "polars"):
            assert pairs[(a, b)] == "zero-copy", (a, b)
    assert report["handoff"]["handoff_shares_memory"] is True
    table = run("interop", "--size", 10_000, "--repeats", 1)
    assert table.exit_code == 0 and "zero-copy" in table.stdout and "host round trip" in table.stdout
