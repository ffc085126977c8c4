"""Recordings as people save them: semicolons and decimal commas, a time or sample column before
the signal, arrays with the samples down the rows."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from devicepipe.cli import app
from devicepipe.core.errors import ReadError
from devicepipe.ecg import ecg_peaks, evaluate_beats
from devicepipe.io import read_series
from devicepipe.io.channels import signal_column
from devicepipe.io.chunks import chunk_reader, recording_length
from devicepipe.io.tables import csv_layout, csv_rows
from devicepipe.simulate import simulate_ecg

runner = CliRunner()


def _european(values: np.ndarray, header: bool) -> str:
    rows = [f"{i / 250:.3f};{v:.5f}".replace(".", ",") for i, v in enumerate(values)]
    return "\n".join((["time;ecg"] if header else []) + rows) + "\n"


@pytest.mark.parametrize(
    ("text", "layout"),
    [
        ("a,b\n1.5,2\n3,4\n", (",", ".")),
        ("a;b\n1.5;2\n3;4\n", (";", ".")),
        ("a;b\n1,5;2\n-3,25;4e-3\n", (";", ",")),
        ("1,5;2\n3,0;4\n", (";", ",")),  # no header: the fields are numbers only when split at semicolons
        ("1,5\n3,0\n", (",", ".")),  # two columns of whole numbers: commas
        ("note,text\nok;fine,x\n", (",", ".")),  # semicolons inside text: still commas
        ("id,notes\n1,a;b\n2,c;d\n", (",", ".")),  # ... on every row, but not in the header
        ("Datetime;load\n2023-01-01 00:00;512,5\n2023-01-01 01:00;498,25\n", (";", ",")),  # times beside
        # tabs or bars between the fields of a file still named .csv (they had been one column of text)
        ("time\tecg\n0.0\t0.02\n0.004\t0.03\n", ("\t", ".")),
        ("time\tecg\n0,0\t0,02\n0,004\t0,03\n", ("\t", ",")),
        ("ecg|ecg2\n0.02|0.02\n0.03|0.03\n", ("|", ".")),
        ("id,notes\n1,a|b\n2,c|d\n", (",", ".")),  # bars inside text: still commas
    ],
)
def test_the_delimiter_and_decimal_mark_are_read_from_the_rows(tmp_path, text, layout):
    path = tmp_path / "x.csv"
    path.write_text(text)
    assert csv_layout(path) == layout
    tsv = tmp_path / "x.tsv"
    tsv.write_text(text)
    assert csv_layout(tsv) == ("\t", ".")


def test_a_csv_with_tabs_or_bars_between_its_fields_reads_the_values_written(tmp_path):
    values = np.random.default_rng(1).normal(size=300)
    for mark in ("\t", "|"):
        path = tmp_path / "other.csv"
        path.write_text(f"time{mark}ecg\n" + "".join(f"{i / 250:.3f}{mark}{v:.5f}\n" for i, v in enumerate(values)))
        rec = read_series(path, "ecg", sampling_rate=250)
        np.testing.assert_allclose(rec.samples.numpy(), values, atol=5e-6)


@pytest.mark.parametrize("header", [True, False])
def test_a_semicolon_file_with_decimal_commas_reads_the_values_written(tmp_path, header):
    values = np.random.default_rng(1).normal(size=300)
    path = tmp_path / "eu.csv"
    path.write_text(_european(values, header))
    rec = read_series(path, "ecg" if header else 1, sampling_rate=250)
    np.testing.assert_allclose(rec.samples.numpy(), values, atol=5e-6)
    assert csv_rows(path) == recording_length(path) == 300


def test_a_load_series_exported_with_semicolons_reads_its_times_and_values(tmp_path):
    path = tmp_path / "load.csv"
    path.write_text("Datetime;load_MW\n2023-01-01 00:00;512,5\n2023-01-01 01:00;498,25\n2023-01-01 02:00;-1,5\n")
    rec = read_series(path, "load_MW", time_column="Datetime")
    np.testing.assert_allclose(rec.samples.numpy(), [512.5, 498.25, -1.5])
    assert rec.sampling_rate == pytest.approx(1 / 3600)


def test_rows_are_counted_with_and_without_a_header_and_an_empty_file_is_one_error(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("0.5\n0.25\n-1\n")
    assert csv_rows(path) == 3  # (the first row is data, not names)
    path.write_text("ecg\n0.5\n0.25\n-1\n")
    assert csv_rows(path) == 3
    path.write_text("")
    with pytest.raises(ReadError, match="is empty"):
        recording_length(path)


@pytest.mark.parametrize(
    ("ending", "encoding", "columns"),
    [("\n", "utf-8", 1), ("\r\n", "utf-8", 1), ("\r", "utf-8", 1), ("\n", "utf-16", 1), ("\n", "utf-8", 2)],
)
def test_the_empty_lines_that_end_a_csv_are_not_samples(tmp_path, ending, encoding, columns):
    # an editor or an export leaves empty lines after the last row; they were read as NaN samples,
    # so the file was refused ("non-finite value(s) ... the first at sample 7,500"), whole and in chunks
    x = simulate_ecg(30, 250, seed=3).signal.numpy()
    rows = [f"{i / 250:.3f},{v:.5f}" if columns == 2 else f"{v:.5f}" for i, v in enumerate(x)]
    head = "time,ecg" if columns == 2 else "ecg"
    clean, ended = tmp_path / "clean.csv", tmp_path / "ended.csv"
    with clean.open("w", encoding=encoding, newline="") as fh:
        fh.write(ending.join([head, *rows]) + ending)
    with ended.open("w", encoding=encoding, newline="") as fh:
        fh.write(ending.join([head, *rows]) + ending * 3)
    want = read_series(clean, "ecg", sampling_rate=250).samples
    got = read_series(ended, "ecg", sampling_rate=250).samples
    assert want.shape == (x.size,) and torch.equal(got, want)
    assert csv_rows(ended) == csv_rows(clean) == x.size
    read, n, _ = chunk_reader(ended, "ecg", sampling_rate=250)
    assert n == recording_length(ended, "ecg") == x.size and torch.equal(read(n - 1000, n), want[-1000:])


def test_an_empty_line_inside_a_csv_is_a_missing_sample_in_its_place(tmp_path):
    x = simulate_ecg(30, 250, seed=3).signal.numpy()
    lines = ["ecg", *(f"{v:.5f}" for v in x)]
    lines[1001] = ""  # (sample 1000)
    (tmp_path / "gap.csv").write_text("\n".join(lines) + "\n\n")
    with pytest.raises(ReadError, match="the first at sample 1,000"):
        read_series(tmp_path / "gap.csv", sampling_rate=250)
    kept = read_series(tmp_path / "gap.csv", sampling_rate=250, nan="interpolate").samples
    assert kept.shape == (x.size,)  # the gap kept its place; the empty line at the end is no sample


def test_a_time_or_sample_column_before_the_signal_is_passed_over(tmp_path):
    sim = simulate_ecg(30, 250, seed=3)
    x = sim.signal.numpy()
    n = x.size
    stamps = pd.date_range("2024-03-01", periods=n, freq="4ms")
    tables = {
        "seconds.csv": pd.DataFrame({"time": np.arange(n) / 250, "ecg": x}),
        "sample.csv": pd.DataFrame({"sample #": np.arange(n), "MLII": x, "V5": -x}),
        "stamps.csv": pd.DataFrame({"Datetime": stamps.strftime("%Y-%m-%d %H:%M:%S.%f"), "ecg": x}),
        "stamps.parquet": pd.DataFrame({"Datetime": stamps, "ecg": x}),
        "epoch_ms.parquet": pd.DataFrame({"t_ms": 1.7e12 + 4.0 * np.arange(n), "ecg": x}),
        "two_axes.csv": pd.DataFrame({"sample": np.arange(n), "time": np.arange(n) / 250, "lead": x}),
        "label.csv": pd.DataFrame({"time": np.arange(n) / 250, "ecg": x, "label": ["N"] * n}),
    }
    expected = {
        "seconds.csv": ("ecg", ["time"]), "sample.csv": ("MLII", ["sample #"]),
        "stamps.csv": ("ecg", ["Datetime"]), "stamps.parquet": ("ecg", ["Datetime"]),
        "epoch_ms.parquet": ("ecg", ["t_ms"]), "two_axes.csv": ("lead", ["sample", "time"]),
        "label.csv": ("ecg", ["time"]),
    }  # fmt: skip
    for name, frame in tables.items():
        path = tmp_path / name
        frame.to_csv(path, index=False) if name.endswith(".csv") else frame.to_parquet(path, index=False)
        assert signal_column(path) == expected[name], name
    # no axis: the first column, whatever it holds
    pd.DataFrame({"ecg": x, "time": np.arange(n) / 250}).to_csv(tmp_path / "first.csv", index=False)
    assert signal_column(tmp_path / "first.csv") == (0, [])
    pd.DataFrame({"ramp": np.arange(n) / 250}).to_csv(tmp_path / "ramp.csv", index=False)
    assert signal_column(tmp_path / "ramp.csv") == (0, [])  # every column rises: nothing to choose instead
    flat = np.zeros(n)
    flat[::50] = 1.0  # a lead that never falls below zero but falls back to it
    pd.DataFrame({"time": np.arange(n) / 250, "spikes": flat}).to_csv(tmp_path / "spikes.csv", index=False)
    assert signal_column(tmp_path / "spikes.csv") == ("spikes", ["time"])
    # a lead that never falls but does not rise either (disconnected, flat) is a signal, not an axis
    pd.DataFrame({"lead_I": np.zeros(n), "ecg": x}).to_csv(tmp_path / "flat_first.csv", index=False)
    assert signal_column(tmp_path / "flat_first.csv") == (0, [])
    assert signal_column(np.zeros(10)) == (0, [])


def test_beats_of_a_csv_with_a_time_column_are_the_true_beats(tmp_path):
    sim = simulate_ecg(120, 500, seed=5)
    x = sim.signal.numpy()
    path = tmp_path / "export.csv"
    text = "time;ecg\n" + "".join(f"{i / 500:.4f};{v:.5f}\n".replace(".", ",") for i, v in enumerate(x))
    path.write_text(text)
    result = runner.invoke(app, ["beats", str(path), "--sampling-rate", "500", "--out", str(tmp_path / "o"),
                                 "--no-figures", "--device", "cpu"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "(ecg, 500 Hz" in result.output
    table = pd.read_parquet(tmp_path / "o" / "beats.parquet")
    score = evaluate_beats(sim.r_peaks.numpy(), table["peak"].to_numpy(), 500)
    assert score.sensitivity >= 0.99 and score.ppv >= 0.99, score
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["channel"] == "ecg"


def test_an_npy_with_the_samples_down_the_rows_is_read_along_time(tmp_path):
    sim = simulate_ecg(40, 250, seed=6)
    x = sim.signal.numpy()
    leads = np.stack([x, -0.5 * x], axis=1)  # (time, 2)
    np.save(tmp_path / "rows.npy", leads)
    rec = read_series(tmp_path / "rows.npy", sampling_rate=250)
    assert tuple(rec.samples.shape) == (2, x.size)
    np.testing.assert_array_equal(rec.samples.numpy(), leads.T)
    part = read_series(tmp_path / "rows.npy", 1, sampling_rate=250, start=100, stop=400)
    np.testing.assert_array_equal(part.samples.numpy(), leads[100:400, 1])
    assert recording_length(tmp_path / "rows.npy") == x.size
    read, n, _ = chunk_reader(tmp_path / "rows.npy", 1, sampling_rate=250)
    assert n == x.size and torch.equal(read(1000, 1500), torch.from_numpy(leads[1000:1500, 1]))
    assert torch.equal(ecg_peaks(rec.samples[0], 250), ecg_peaks(torch.from_numpy(x), 250))
    np.save(tmp_path / "cols.npy", leads.T.copy())  # (2, time): as before
    assert torch.equal(read_series(tmp_path / "cols.npy", sampling_rate=250).samples, rec.samples)


def test_beats_of_an_empty_csv_is_one_line(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    result = runner.invoke(app, ["beats", str(tmp_path / "empty.csv"), "--sampling-rate", "250",
                                 "--out", str(tmp_path / "o")])  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "empty.csv is empty" in lines[0], result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("name", "ecg"),
    [("ECG II", True), ("EKG", True), ("ecg1", True), ("MLII", True), ("V5", True), ("aVF", True), ("II", True),
     ("V", True), ("EEG Fpz-Cz", False), ("Resp", False), ("PLETH", False), ("ABP", False), ("V7", False),
     ("Volume", False), ("IIII", False)],
)  # fmt: skip
def test_ecg_lead_names(name, ecg):
    from devicepipe.io.channels import is_ecg_name

    assert is_ecg_name(name) is ecg


def test_named_signals_before_the_ecg_are_passed_over(tmp_path):
    import edfio
    import wfdb

    sim = simulate_ecg(60, 500, seed=8)
    x = sim.signal.numpy().astype(np.float64)
    resp = np.sin(np.arange(60 * 25) / 25 * 2 * np.pi * 0.25)
    edf = edfio.Edf([
        edfio.EdfSignal(resp, sampling_frequency=25, label="Resp", physical_range=(-2, 2)),
        edfio.EdfSignal(x, sampling_frequency=500, label="ECG II", physical_dimension="mV", physical_range=(-5, 5)),
    ])  # fmt: skip
    edf.write(tmp_path / "psg.edf")
    assert signal_column(tmp_path / "psg.edf") == ("ECG II", ["Resp"])
    result = runner.invoke(app, ["beats", str(tmp_path / "psg.edf"), "--out", str(tmp_path / "o"), "--no-figures"])
    assert result.exit_code == 0, result.output
    found = pd.read_parquet(tmp_path / "o" / "beats.parquet")["peak"].to_numpy()
    score = evaluate_beats(sim.r_peaks.numpy(), found, 500)
    assert score.sensitivity >= 0.99 and score.ppv >= 0.99, score
    sig = np.stack([np.resize(resp, x.size), x], 1)
    wfdb.wrsamp("mon", fs=500, units=["l", "mV"], sig_name=["RESP", "II"], p_signal=sig, fmt=["16", "16"],
                write_dir=str(tmp_path))  # fmt: skip
    assert signal_column(tmp_path / "mon") == ("II", ["RESP"])
    assert signal_column(tmp_path / "mon.hea") == ("II", ["RESP"])
    edfio.Edf([edfio.EdfSignal(resp, sampling_frequency=25, label="Resp", physical_range=(-2, 2))]).write(
        tmp_path / "resp.edf"
    )
    assert signal_column(tmp_path / "resp.edf") == (0, [])  # no ECG named: the first, as always


def test_a_table_with_timestamps_before_the_ecg_needs_no_stated_rate(tmp_path):
    sim = simulate_ecg(60, 250, seed=9)
    x = sim.signal.numpy()
    stamps = pd.date_range("2024-05-01 08:00", periods=x.size, freq="4ms")
    table = pd.DataFrame({"Datetime": stamps.strftime("%Y-%m-%d %H:%M:%S.%f"), "ecg": x})
    table.to_csv(tmp_path / "t.csv", index=False)
    result = runner.invoke(app, ["beats", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o"), "--no-figures"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["sampling_rate_hz"] == pytest.approx(250.0) and summary["channel"] == "ecg"
    found = pd.read_parquet(tmp_path / "o" / "beats.parquet")["peak"].to_numpy()
    score = evaluate_beats(sim.r_peaks.numpy(), found, 250)
    assert score.sensitivity >= 0.99 and score.ppv >= 0.99, score
    # seconds as plain numbers say nothing sure about the rate (seconds? milliseconds?): asked for
    pd.DataFrame({"time": np.arange(x.size) / 250, "ecg": x}).to_csv(tmp_path / "s.csv", index=False)
    result = runner.invoke(app, ["beats", str(tmp_path / "s.csv"), "--out", str(tmp_path / "o2")])
    assert result.exit_code == 2 and "pass --sampling-rate" in result.stderr, result.output


def test_chunks_of_a_duration_are_timed_by_the_rate_of_the_signal_chosen(tmp_path):
    import edfio

    sim = simulate_ecg(60, 500, seed=10)
    resp = np.sin(np.arange(60 * 25) / 25 * 2 * np.pi * 0.25)
    edfio.Edf([
        edfio.EdfSignal(resp, sampling_frequency=25, label="Resp", physical_range=(-2, 2)),
        edfio.EdfSignal(sim.signal.numpy().astype(np.float64), sampling_frequency=500, label="ECG II",
                        physical_range=(-5, 5)),
    ]).write(tmp_path / "psg.edf")  # fmt: skip
    result = runner.invoke(app, ["beats", str(tmp_path / "psg.edf"), "--chunk", "20s", "--out", str(tmp_path / "o"),
                                 "--no-figures"])  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["channel"] == "ECG II" and summary["sampling_rate_hz"] == 500
    assert summary["chunked"]["seconds_per_chunk"] == pytest.approx(20.0)  # not 20 s at the first signal's 25 Hz


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"load": [1.0, 2.0], "timestamp": pd.to_datetime(["2024-01-01 00:00", "2024-01-01 01:00"])}, "timestamp"),
        ({"v": [1.0, 2.0], "when": pd.to_datetime(["2024-01-01", "2024-01-02"]).date}, "when"),
        ({"Date_UTC": ["1/2/2024 0h", "1/2/2024 1h"], "load": [1.0, 2.0]}, "Date_UTC"),  # text named as times
        ({"site": ["a", "b"], "load": [1.0, 2.0]}, None),  # text not named as times
        ({"seconds": [0.0, 1.0], "load": [1.0, 2.0]}, None),  # numbers are not times
    ],
)
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_the_time_column_of_a_table_is_its_first_column_of_times(tmp_path, table, expected, suffix):
    from devicepipe.io.channels import time_column_of

    path = tmp_path / f"t{suffix}"
    frame = pd.DataFrame(table)
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path, index=False)
    assert time_column_of(path) == expected
    assert time_column_of(tmp_path / f"missing{suffix}") is None and time_column_of(frame) is None


def test_a_table_of_several_leads_has_its_beats_found_on_them_together(tmp_path):
    from devicepipe.io.channels import choose_signal

    sim = simulate_ecg(60, 250, seed=1)
    x = sim.signal.numpy()
    noisy = x + np.random.default_rng(0).normal(0, 1.0, x.size)  # a lead that lost its contact
    time = np.arange(x.size) / 250
    pd.DataFrame({"time": time, "II": noisy, "V5": x}).to_csv(tmp_path / "two.csv", index=False)
    assert choose_signal(tmp_path / "two.csv").leads == ("II", "V5")
    # the chosen column must be the first lead: a respiration column first is read alone, as before
    pd.DataFrame({"time": time, "resp": x, "II": x, "V5": x}).to_csv(tmp_path / "resp.csv", index=False)
    assert choose_signal(tmp_path / "resp.csv").leads == ()
    pd.DataFrame({"time": time, "ecg": x, "pleth": x}).to_csv(tmp_path / "one.csv", index=False)
    assert choose_signal(tmp_path / "one.csv").leads == ("ecg",)
    out = tmp_path / "out"
    args = ["beats", str(tmp_path / "two.csv"), "--out", str(out), "--no-figures", "--sampling-rate", "250"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "beats found on II and V5 together, cut from II" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["beats_found_on_leads"] == ["II", "V5"]
    found = torch.as_tensor(pd.read_parquet(out / "beats.parquet")["peak"].to_numpy())
    alone = ecg_peaks(torch.as_tensor(noisy, dtype=torch.float32), 250.0)
    truth = sim.r_peaks
    together, first = (evaluate_beats(truth, p, 250.0, n_samples=x.size).f1 for p in (found, alone))
    assert together > 0.99 and together > first, (together, first)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        # one column written with decimal commas, between commas: each value reads as two fields
        ("ecg\n0,0204\n0,0355\n", ["the row '0,0204' holds 2", "decimal commas", "';' between the columns"]),
        ("a,b\n1,2,3\n4,5\n", ["its header names 2 column(s), and the row '1,2,3' holds 3", "check the delimiter"]),
    ],
)
def test_a_row_of_more_fields_than_the_header_names_is_explained(tmp_path, text, says):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(ReadError) as raised:
        read_series(tmp_path / "t.csv", sampling_rate=250)
    assert all(part in str(raised.value) for part in says), str(raised.value)


def test_a_recording_is_looked_at_once_for_its_channel(tmp_path, monkeypatch):
    # the channel and the time column are chosen once per run (a table's first rows read once),
    # and that choice is what is read: the detector's, the chunk size's and the read's own
    import devicepipe.pipelines.reading as reading
    from devicepipe.pipelines import run_beats

    calls = []
    choose = reading.choose_signal
    monkeypatch.setattr(reading, "choose_signal", lambda source: calls.append(source) or choose(source))
    sim = simulate_ecg(30, 250, seed=2)
    x = sim.signal.numpy()
    pd.DataFrame({"sample": np.arange(x.size), "ecg": x}).to_csv(tmp_path / "rec.csv", index=False)
    result = run_beats(tmp_path / "rec.csv", tmp_path / "out", sampling_rate=250, figures=False)
    assert len(calls) == 1, calls
    assert result.channel == "ecg" and result.peaks.size == sim.r_peaks.numel()  # (past the sample numbers)
