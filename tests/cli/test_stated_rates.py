"""A sampling rate the recording states is never silently overridden (``--override-rate`` says so)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import wfdb
from one_line import one_line_error
from typer.testing import CliRunner

from devicepipe.cli import app
from devicepipe.core.errors import ReadError
from devicepipe.io import OverrideRate, read_series
from devicepipe.simulate import simulate_ecg, write_simulated_ecg

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def record(tmp_path):
    """A WFDB record of a simulated ECG whose header states 360 Hz, and the same signal as CSV (no rate)."""
    sim = simulate_ecg(60, 360, seed=7)
    signal = sim.signal.numpy()[:, None].astype("float64")
    wfdb.wrsamp("r", fs=360, units=["mV"], sig_name=["MLII"], p_signal=signal, fmt=["16"], write_dir=str(tmp_path))
    write_simulated_ecg(sim, tmp_path / "r.csv")
    return tmp_path / "r.hea", sim


@pytest.mark.parametrize("extra", [[], ["--chunk", "20s"], ["--strict"]])
def test_a_rate_against_the_stated_one_is_refused_and_nothing_is_written(record, tmp_path, extra):
    hea, _ = record
    out = tmp_path / "out"
    result = run("beats", hea, "--out", out, "--sampling-rate", 250, "--no-figures", *extra)
    one_line_error(result, "states its sampling rate, 360 Hz", "--sampling-rate 250", "--override-rate")
    assert not out.exists()


def test_the_override_reads_at_the_rate_given_and_the_summary_keeps_both(record, tmp_path):
    hea, sim = record
    out = tmp_path / "out"
    result = run("beats", hea, "--out", out, "--sampling-rate", 250, "--override-rate", "--no-figures")
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sampling_rate_hz"] == 250 and summary["stated_sampling_rate_hz"] == 360
    assert pq.read_schema(out / "beats.parquet").metadata[b"devicepipe.sampling_rate"] == b"250.0"
    # the rate stated, or the same rate given, reads as before and records one rate
    same = run("beats", hea, "--out", tmp_path / "same", "--sampling-rate", 360, "--no-figures")
    assert same.exit_code == 0, same.output
    summary = json.loads((tmp_path / "same" / "summary.json").read_text())
    assert summary["sampling_rate_hz"] == 360 and "stated_sampling_rate_hz" not in summary
    assert summary["counts"]["beats_found"] == pytest.approx(sim.r_peaks.numel(), abs=2)


def test_a_file_that_states_no_rate_takes_the_one_given(record, tmp_path):
    hea, _ = record
    result = run("beats", hea.with_suffix(".csv"), "--out", tmp_path / "csv", "--sampling-rate", 360, "--no-figures")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "csv" / "summary.json").read_text())["sampling_rate_hz"] == 360
    one_line_error(run("beats", hea, "--out", tmp_path / "x", "--override-rate"), "--override-rate", "--sampling-rate")


def test_a_folder_run_does_not_override_its_records(record, tmp_path):
    hea, _ = record
    result = run("beats", hea.parent, "--out", tmp_path / "set", "--sampling-rate", 250, "--workers", 0)
    index = pq.read_table(tmp_path / "set" / "index.parquet").to_pylist()
    by_name = {row["path"].rsplit("/", 1)[-1]: row for row in index}
    assert by_name["r.hea"]["status"] == "failed" and "states its sampling rate, 360 Hz" in by_name["r.hea"]["error"]
    assert by_name["r.csv"]["status"] == "ok" and by_name["r.csv"]["sampling_rate_hz"] == 250
    assert result.exit_code == 1  # a recording failed


def test_the_library_refuses_it_and_takes_an_override_as_said(record):
    hea, _ = record
    with pytest.raises(ReadError, match=r"states its sampling rate, 360 Hz, and sampling_rate 250.*override_rate=True"):
        read_series(hea, sampling_rate=250)
    rec = read_series(hea, sampling_rate=OverrideRate(250))
    assert rec.sampling_rate == 250 and rec.stated_rate == 360
    rec = read_series(hea, sampling_rate=250, override_rate=True)
    assert rec.sampling_rate == 250 and rec.stated_rate == 360
    assert read_series(hea).stated_rate is None


@pytest.mark.parametrize(("rate", "holds"), [("-360", False), ("abc", False), ("0", False), ("360", 360.0),
                                              ("360/1000(0)", 360.0), ("360.5", 360.5)])  # fmt: skip
def test_a_header_rate_that_is_no_rate_is_not_read_as_wfdb_s_default(record, tmp_path, rate, holds):
    hea, _ = record
    fields = hea.read_text().splitlines()
    head = fields[0].split()
    head[2] = rate
    hea.write_text("\n".join([" ".join(head), *fields[1:]]) + "\n")
    result = run("beats", hea, "--out", tmp_path / "out", "--no-figures")
    if holds:
        assert result.exit_code == 0, result.output
        assert json.loads((tmp_path / "out" / "summary.json").read_text())["sampling_rate_hz"] == holds
        return
    one_line_error(result, "the sampling rate of r is unknown", "--sampling-rate")  # not 250 Hz in silence
    given = run("beats", hea, "--out", tmp_path / "given", "--sampling-rate", 360, "--no-figures")
    assert given.exit_code == 0, given.output


@pytest.mark.parametrize("command", [["ecg", "--epochs", "1"], ["beats", "--mode", "centered"]])
def test_a_rate_too_low_for_a_beat_is_one_line(record, tmp_path, command):
    hea, _ = record
    args = [command[0], hea.with_suffix(".csv"), "--out", tmp_path / "out", "--sampling-rate", 1, *command[1:]]
    one_line_error(run(*args), "at 1 Hz a beat's window", "holds 0 sample(s)", "--sampling-rate")
