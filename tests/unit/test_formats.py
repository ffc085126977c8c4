"""The input-format registry (devicepipe.io.formats) and the format that shows its seam: a TSV
whose first line states its rate."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from devicepipe.cli import app
from devicepipe.core.errors import ReadError
from devicepipe.io import read_series, write_parquet
from devicepipe.io.chunks import recording_length
from devicepipe.io.formats import FORMATS, format_of
from devicepipe.pipelines import run_beats
from devicepipe.simulate import simulate_ecg

runner = CliRunner()


def _rate_tsv(path, signal: np.ndarray, rate: str = "250") -> None:
    rows = "".join(f"{i / 250:.4f}\t{v:.6f}\n" for i, v in enumerate(signal))
    path.write_text(f"# rate: {rate}\ntime_s\tecg\n{rows}", encoding="utf-8")


@pytest.fixture(scope="module")
def ecg() -> np.ndarray:
    """90 s of a simulated ECG at 250 Hz, rounded as the text file holds it."""
    return np.round(simulate_ecg(90, 250, seed=4, ectopic_rate=0.05).signal.numpy().astype(np.float64), 6)


def test_each_file_finds_its_own_format(tmp_path, ecg):
    (tmp_path / "a.csv").write_text("x\n1\n")
    (tmp_path / "b.tsv").write_text("x\n1\n")
    _rate_tsv(tmp_path / "c.tsv", ecg[:10])
    np.save(tmp_path / "d.npy", ecg[:10])
    (tmp_path / "r.hea").write_text("r 1 250 10\n")
    expected = {"a.csv": "csv", "b.tsv": "csv", "c.tsv": "rate-tsv", "d.npy": "npy", "e.parquet": "parquet"}
    expected |= {"f.edf": "edf", "g.BDF": "edf", "r.hea": "wfdb", "r": "wfdb"}
    for name, fmt in expected.items():
        assert format_of(tmp_path / name).name == fmt, name
    assert format_of(tmp_path / "h.xlsx") is None
    assert len({f.name for f in FORMATS}) == len(FORMATS)  # one entry per format


def test_an_unknown_format_is_refused_naming_every_format(tmp_path):
    (tmp_path / "x.xlsx").write_bytes(b"PK")
    with pytest.raises(ReadError) as err:
        read_series(tmp_path / "x.xlsx")
    message = str(err.value)
    assert "unknown format '.xlsx'" in message
    for described in (".csv", ".tsv", ".parquet", ".npy", ".edf", ".bdf", "WFDB record", "'# rate: HZ'"):
        assert described in message, described


def test_a_tsv_that_states_its_rate_reads_with_it(tmp_path, ecg):
    _rate_tsv(tmp_path / "e.tsv", ecg)
    rec = read_series(tmp_path / "e.tsv", "ecg", device="cpu")
    assert rec.sampling_rate == 250.0 and rec.channels == ("ecg",)
    assert torch.allclose(rec.samples.double(), torch.from_numpy(ecg), atol=1e-6)
    assert recording_length(tmp_path / "e.tsv") == len(ecg)
    part = read_series(tmp_path / "e.tsv", "ecg", start=1000, stop=1500, device="cpu")
    assert torch.equal(part.samples, rec.samples[1000:1500])


def test_its_beats_are_those_of_the_same_samples_in_parquet(tmp_path, ecg):
    _rate_tsv(tmp_path / "e.tsv", ecg)
    write_parquet({"ecg": torch.from_numpy(ecg)}, tmp_path / "e.parquet", sampling_rate=250)
    ours = run_beats(tmp_path / "e.tsv", tmp_path / "tsv", channel="ecg", device="cpu", figures=False)
    theirs = run_beats(tmp_path / "e.parquet", tmp_path / "pq", device="cpu", figures=False)
    assert ours.peaks.size > 90 and np.array_equal(ours.peaks, theirs.peaks)
    chunked = run_beats(tmp_path / "e.tsv", tmp_path / "ch", channel="ecg", device="cpu", figures=False, chunk="20s")
    assert np.array_equal(np.asarray(chunked.peaks), theirs.peaks)
    # on the command line: no --sampling-rate needed
    result = runner.invoke(app, ["beats", str(tmp_path / "e.tsv"), "-c", "ecg", "--out", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    assert f"beats found: {theirs.peaks.size:,}" in result.stdout and "250 Hz" in result.stdout


@pytest.mark.parametrize("rate", ["fast", "-250", "0", "nan", ""])
def test_a_rate_line_that_is_no_rate_is_one_line(tmp_path, ecg, rate):
    _rate_tsv(tmp_path / "e.tsv", ecg[:500], rate=rate)
    result = runner.invoke(app, ["read", str(tmp_path / "e.tsv")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "states its rate as" in lines[0] and "'# rate: 250'" in lines[0]


def test_a_plain_tsv_is_still_a_table_without_a_rate(tmp_path, ecg):
    (tmp_path / "p.tsv").write_text("ecg\n" + "".join(f"{v:.6f}\n" for v in ecg[:500]), encoding="utf-8")
    rec = read_series(tmp_path / "p.tsv", device="cpu")
    assert rec.sampling_rate is None and rec.samples.numel() == 500


def test_a_folder_s_recordings_and_the_help_come_from_the_format_table(tmp_path):
    # every format's suffixes name recordings in a folder, and each is read by a format of the
    # table; the help lists each format's label
    from devicepipe.io.discover import find_recordings
    from devicepipe.io.formats import FORMAT_LABELS, RECORDING_SUFFIXES

    expected = {s for fmt in FORMATS for s in fmt.suffixes}
    assert set(RECORDING_SUFFIXES) == expected and {".hea", ".csv", ".parquet", ".npy", ".edf"} <= expected
    for suffix in RECORDING_SUFFIXES:
        (tmp_path / f"rec{suffix.replace('.', '_')}{suffix}").write_bytes(b"")
        assert format_of(tmp_path / f"rec{suffix}") is not None, suffix
    (tmp_path / "notes.md").write_text("not a recording")
    found = find_recordings(str(tmp_path)).paths
    assert sorted(p.suffix for p in found) == sorted(RECORDING_SUFFIXES)
    labels = [fmt.label for fmt in FORMATS if fmt.label]
    assert len(labels) == 5 and all(label in FORMAT_LABELS for label in labels)
    shown = runner.invoke(app, ["beats", "--help"], terminal_width=400).output
    assert all(label in shown for label in labels)
