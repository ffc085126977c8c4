"""Recordings longer than memory on the command line: --chunk and --memory-budget give the outputs
of one piece, byte for byte; EDF input with its own EDF+ annotations as the reference."""

from __future__ import annotations

import io
import json
import re

import edfio
import numpy as np
import pytest
import wfdb
from typer.testing import CliRunner

from conftest import require_data
from devicepipe.cli import app

runner = CliRunner()
SAME = ("beats.parquet", "beats.csv", "beat_matrix.npy", "100.qrs")


def assert_same_beats(whole, chunked, names=SAME):
    """A run in one piece and one read in chunks wrote the same files, byte for byte."""
    for name in names:
        assert (whole / name).read_bytes() == (chunked / name).read_bytes(), name


#: One lead of a two-lead record (by default its beats are found on both, whole or in chunks).
FIRST_LEAD = ("--channel", "MLII")


def beats(*args):
    return runner.invoke(app, ["beats", *map(str, args)])


@pytest.mark.parametrize("mode", ["seed", "centered"])
@pytest.mark.parametrize("parts", ["as shipped", "small parts"])
def test_chunks_write_the_files_of_one_piece(tmp_path, monkeypatch, mode, parts):
    from devicepipe.core import spill
    from devicepipe.ecg import chunked, quality, ricker
    from devicepipe.heart import rate as heart
    from devicepipe.io import wfdb
    from devicepipe.pipelines import context
    from devicepipe.signal import blocks

    record = require_data("mitdb/100")
    whole = beats(record, "--out", tmp_path / "whole", "--mode", mode, "--no-figures")  # (both leads, as in chunks)
    if parts == "small parts":  # what a week's beats meet: every per-beat stage cut into many parts on disk
        for module, name, value in (
            (context, "BEAT_PART", 97),
            (quality, "QUALITY_BLOCK", 64),
            (chunked, "SELECT_BLOCK", 200),
            (ricker, "MEDIAN_PART", 50),
            (blocks, "MEDIAN_HELD", 10),
            (spill, "SPILL_BUFFER", 100),
            (wfdb, "ANNOTATION_BLOCK", 33),
        ):  # (not the table's parts: they are the Parquet file's row groups)
            monkeypatch.setattr(module, name, value)
        monkeypatch.setattr(heart, "hrv", lambda *a, **k: pytest.fail("the chunked run held its peaks in memory"))
    chunked = beats(record, "--out", tmp_path / "chunked", "--mode", mode, "--no-figures", "--chunk", "2min")
    assert whole.exit_code == 0 and chunked.exit_code == 0, chunked.output
    assert_same_beats(tmp_path / "whole", tmp_path / "chunked")
    summary = json.loads((tmp_path / "chunked" / "summary.json").read_text())
    assert summary["chunked"]["chunks"] == 16 and summary["n_samples"] == 650_000
    one = json.loads((tmp_path / "whole" / "summary.json").read_text())
    assert "chunked" not in one
    for key in ("counts", "heart_rate", "quality", "warnings", "holter", "beats_found_on_leads"):  # (parts on disk)
        assert summary[key] == one[key], key
    assert one["holter"]["counts"]["S"] > 20  # (MIT-BIH 100's atrial premature beats, each read in its part)
    assert one["heart_rate"]["n_ectopic"] > 0 and one["quality"]["beats_rated"] > 2000
    spectral = one["heart_rate"]["frequency"]  # time and frequency domain: the same intervals, between two N beats
    ectopic = one["holter"]["counts"]["S"] + one["holter"]["counts"]["V"]
    assert spectral["n_intervals"] == one["heart_rate"]["n_intervals"]
    assert one["heart_rate"]["n_intervals"] <= one["counts"]["beats_found"] - 1 - ectopic  # each leaves one out or two
    assert "between two N beats" in one["heart_rate"]["nn_cleaning"]
    assert spectral["lf_ms2"] > 0 and "between two N beats" in spectral["method"]
    assert re.search(r"median heart rate: 7\d bpm", chunked.output) and "bpm" in whole.output
    assert chunked.output.split("median heart rate:")[1][:8] == whole.output.split("median heart rate:")[1][:8]


def test_a_chunked_run_draws_the_figures_of_one_piece(tmp_path):
    from PIL import Image

    record = require_data("mitdb/100")
    whole = beats(record, "--out", tmp_path / "whole")
    chunked = beats(record, "--out", tmp_path / "chunked", "--chunk", "5min")
    assert whole.exit_code == 0 and chunked.exit_code == 0, chunked.output
    for name in ("excerpt.png", "heart_rate.png", "intervals.png", "quality.png"):
        one, parts = (Image.open(tmp_path / run / name).convert("RGB") for run in ("whole", "chunked"))
        assert one.size == parts.size and one.tobytes() == parts.tobytes(), name  # drawn from the same numbers


def test_a_tiny_chunk_is_raised_to_the_detectors_smallest(tmp_path):
    # 1 ms is a third of a sample at 360 Hz: no stage may work a sample at a time
    record = require_data("mitdb/100")
    result = beats(record, "--out", tmp_path / "o", "--chunk", "1ms", "--no-figures", *FIRST_LEAD)
    assert result.exit_code == 0, result.output
    chunked = json.loads((tmp_path / "o" / "summary.json").read_text())["chunked"]
    assert chunked["seconds_per_chunk"] >= 1.0  # (the detector aligns its chunks to whole blocks of beats)
    assert chunked["chunks"] == -(-650_000 // chunked["samples_per_chunk"])
    assert beats(record, "--out", tmp_path / "whole", "--no-figures", *FIRST_LEAD).exit_code == 0
    assert_same_beats(tmp_path / "whole", tmp_path / "o")


def test_a_small_memory_budget_switches_chunking_on(tmp_path):
    record = require_data("mitdb/100")
    result = beats(record, "--out", tmp_path / "o", "--memory-budget", "1MB", "--no-figures")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["chunked"]["samples_per_chunk"] > 0 and summary["counts"]["beats_found"] == 2273
    assert summary["beats_found_on_leads"] == ["MLII", "V5"]  # both leads, in chunks as in one piece
    whole = beats(record, "--out", tmp_path / "whole", "--no-figures")
    for output in (result.output, whole.output):
        assert "(beats found on MLII and V5 together, cut from MLII, 360 Hz" in output
    assert_same_beats(tmp_path / "whole", tmp_path / "o")


def test_a_csv_is_counted_only_when_its_size_could_exceed_the_budget(tmp_path, monkeypatch):
    from devicepipe.pipelines import chunked
    from devicepipe.simulate import simulate_ecg

    sim = simulate_ecg(120, 250, seed=2)
    path = tmp_path / "ecg.csv"
    path.write_text("time,ecg\n" + "".join(f"{i / 250:.3f},{v:.5f}\n" for i, v in enumerate(sim.signal.tolist())))
    counted = []
    original = chunked.recording_length
    monkeypatch.setattr(chunked, "recording_length", lambda *a: counted.append(a) or original(*a))
    fits = beats(path, "--sampling-rate", 250, "--out", tmp_path / "fits", "--no-figures")
    assert fits.exit_code == 0, fits.output
    assert counted == []  # under a megabyte against gigabytes free: no pass over the file to count
    small = beats(path, "--sampling-rate", 250, "--out", tmp_path / "small", "--memory-budget", "100KB", "--no-figures")
    assert small.exit_code == 0, small.output
    assert len(counted) == 1 and "chunked" in json.loads((tmp_path / "small" / "summary.json").read_text())
    assert_same_beats(tmp_path / "fits", tmp_path / "small", ("beats.parquet", "beat_matrix.npy"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--chunk", "5min", "--nan", "drop"], "needs the whole recording in memory"),
        (["--chunk", "5"], "has no unit"),
        (["--chunk", "5min", "--method", "seed"], "--chunk is made for the ricker method, not seed; use --method"),
        (["--memory-budget", "lots"], "cannot read size"),
    ],
)
def test_bad_chunk_settings_are_one_line(tmp_path, args, message):
    result = beats(require_data("mitdb/100"), "--out", tmp_path / "o", *args)
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()


def _object_npy() -> bytes:
    """A valid .npy file whose array holds Python objects (which only unpickling reads)."""
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (lambda whole: whole[: len(whole) // 2], "greater than file size|could only read"),  # cut short
        (lambda whole: whole[:100], "reading array header"),  # the header cut
        (lambda whole: b"not an array at all " * 10, "not an .npy header"),  # not NPY
        (lambda whole: _object_npy(), r"it holds Python objects \(dtype object\)"),  # NPY, not numbers
    ],
)
@pytest.mark.parametrize("chunking", [["--chunk", "1min"], []])
def test_a_damaged_npy_recording_is_one_line(tmp_path, content, message, chunking):
    good = tmp_path / "good.npy"
    np.save(good, np.zeros(60_000, np.float32))
    bad = tmp_path / "bad.npy"
    bad.write_bytes(content(good.read_bytes()))
    result = beats(bad, "--sampling-rate", 250, *chunking, "--out", tmp_path / "o")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "bad.npy is not a readable .npy array of numbers" in result.stderr and re.search(message, result.stderr)
    assert not (tmp_path / "o").exists()


def test_an_edf_holter_with_its_own_annotations_as_the_reference(tmp_path):
    base = require_data("mitdb/100")
    rec, ann = wfdb.rdrecord(str(base)), wfdb.rdann(str(base), "atr")
    path = tmp_path / "holter.edf"
    padded = np.pad(rec.p_signal.T, ((0, 0), (0, -rec.sig_len % 360)))  # whole 1-s data records
    signals = [
        edfio.EdfSignal(s, 360.0, label=name, physical_dimension="mV", physical_range=(-5.0, 5.0))
        for s, name in zip(padded, rec.sig_name, strict=True)
    ]
    notes = [
        edfio.EdfAnnotation(sample / 360, None, symbol) for sample, symbol in zip(ann.sample, ann.symbol, strict=True)
    ]
    edfio.Edf(signals, annotations=notes).write(path)
    result = beats(path, "--out", tmp_path / "o", "--reference", path, "--chunk", "10min", "--no-figures")
    assert result.exit_code == 0, result.output
    accuracy = json.loads((tmp_path / "o" / "summary.json").read_text())["accuracy"]
    assert (accuracy["tp"], accuracy["fp"], accuracy["fn"]) == (2271, 0, 0)
    assert (tmp_path / "o" / "holter.qrs").is_file()
