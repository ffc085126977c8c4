import os
import stat

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from devicepipe.core.errors import ReadError
from devicepipe.core.interop import shares_memory
from devicepipe.io import (
    atomic_path,
    read_reference,
    read_reference_days,
    read_series,
    staged_dir,
    write_csv,
    write_json,
    write_npy,
    write_parquet,
)
from devicepipe.io.read import declares_sampling_rate
from devicepipe.simulate import simulate_ecg, simulate_load, write_simulated_ecg, write_simulated_load


@pytest.fixture
def table_csv(tmp_path):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((50, 3)).astype(np.float32)
    path = tmp_path / "t.csv"
    lines = ["a,b,c"] + [",".join(repr(float(v)) for v in row) for row in data]
    path.write_text("\n".join(lines) + "\n")
    return path, data


def test_csv_column_by_name_and_position(table_csv, device):
    path, data = table_csv
    rec = read_series(path, "b", device=device)
    assert rec.samples.shape == (50,) and rec.samples.dtype == torch.float32
    assert rec.samples.device.type == device.type
    np.testing.assert_array_equal(rec.samples.cpu().numpy(), data[:, 1])
    assert rec.channels == ("b",) and rec.sampling_rate is None
    np.testing.assert_array_equal(read_series(path, 2).samples.numpy(), data[:, 2])
    np.testing.assert_array_equal(read_series(path, -1).samples.numpy(), data[:, 2])


def test_csv_all_columns_become_channels(table_csv):
    path, data = table_csv
    rec = read_series(path, sampling_rate=100)
    assert rec.samples.shape == (3, 50)
    np.testing.assert_array_equal(rec.samples.numpy(), data.T)
    assert rec.sampling_rate == 100 and rec.duration_s == pytest.approx(0.5)
    two = read_series(path, ["c", 0])
    np.testing.assert_array_equal(two.samples.numpy(), data[:, [2, 0]].T)


def test_csv_without_header_and_tsv(tmp_path):
    values = np.array([1.5, -2.0, 3.25, 1e-3], dtype=np.float32)
    path = tmp_path / "nohead.csv"
    path.write_text("\n".join(f"{v!r},{2 * v!r}" for v in values.tolist()) + "\n")
    rec = read_series(path, 1)
    np.testing.assert_array_equal(rec.samples.numpy(), 2 * values)
    assert rec.channels == ("f1",)
    tsv = tmp_path / "x.tsv"
    tsv.write_text("x\ty\n1\t2\n3\t4\n")
    np.testing.assert_array_equal(read_series(tsv, "y").samples.numpy(), [2, 4])


def test_parquet_reads_rate_from_metadata(tmp_path, device):
    x = np.linspace(-1, 1, 101).astype(np.float64)
    path = write_parquet({"ecg": x, "other": np.arange(101)}, tmp_path / "r.parquet", sampling_rate=360.0)
    rec = read_series(path, "ecg", device=device, dtype=torch.float64)
    assert rec.sampling_rate == 360.0 and rec.samples.dtype == torch.float64
    np.testing.assert_array_equal(rec.samples.cpu().numpy(), x)
    ints = read_series(path, "other")
    np.testing.assert_array_equal(ints.samples.numpy(), np.arange(101, dtype=np.float32))


def test_npy_one_and_two_dimensional(tmp_path):
    a = np.arange(10, dtype=np.float32)
    write_npy(a, tmp_path / "a.npy")
    np.testing.assert_array_equal(read_series(tmp_path / "a.npy").samples.numpy(), a)
    b = np.stack([a, -a])
    write_npy(b, tmp_path / "b.npy")
    assert read_series(tmp_path / "b.npy").samples.shape == (2, 10)
    np.testing.assert_array_equal(read_series(tmp_path / "b.npy", 1).samples.numpy(), -a)


def test_in_memory_sources_share_memory_where_possible():
    a = np.arange(1000, dtype=np.float32)
    rec = read_series(a)
    assert shares_memory(rec.samples, a)
    a[3] = -7.0  # behavioural proof: the recording sees the change
    assert float(rec.samples[3]) == -7.0
    # float64 into float32 is a conversion, so a copy
    assert not shares_memory(read_series(a.astype(np.float64)).samples, a)
    t = torch.arange(5, dtype=torch.float32)
    assert read_series(t).samples.data_ptr() == t.data_ptr()
    arrow = pa.array(a)
    assert shares_memory(read_series(arrow).samples, arrow.to_numpy(zero_copy_only=True))


def test_pandas_series_with_datetime_index():
    pd = pytest.importorskip("pandas")
    idx = pd.date_range("2024-01-01", periods=6, freq="h")
    s = pd.Series(np.arange(6, dtype=np.float32), index=idx, name="load")
    rec = read_series(s)
    assert rec.channels == ("load",)
    assert shares_memory(rec.samples, s.to_numpy())
    np.testing.assert_array_equal(rec.timestamps_numpy(), idx.to_numpy())
    assert rec.sampling_rate == pytest.approx(1 / 3600)
    df = pd.DataFrame({"t": idx[::-1], "v": np.arange(6.0)})
    rec = read_series(df, "v", time_column="t")
    np.testing.assert_array_equal(rec.samples.numpy(), np.arange(6.0)[::-1])
    assert not rec.time_report.was_sorted


def test_a_dataframe_with_a_datetime_index_has_its_times():
    pd = pytest.importorskip("pandas")
    idx = pd.date_range("2024-03-30", periods=48, freq="h", tz="Europe/Rome")  # over a change of clock
    df = pd.DataFrame({"a": np.arange(48.0), "b": -np.arange(48.0)}, index=idx)
    rec = read_series(df.iloc[::-1], "a")
    utc = idx.tz_convert("UTC").tz_localize(None).to_numpy()  # a zone's times in UTC, as from a file's column
    np.testing.assert_array_equal(rec.timestamps_numpy(), utc)
    np.testing.assert_array_equal(rec.samples.numpy(), np.arange(48.0))
    report = rec.time_report
    assert not report.was_sorted and report.n_gaps == report.n_duplicates == 0 and report.step_s == 3600
    assert read_series(df.reset_index(drop=True)).time_report is None  # a plain index: no times
    with pytest.raises(ReadError, match=r"column 'when' holds .*pass it as the time column \(time_column='when'\)"):
        read_series(df.reset_index(names="when"))


def test_time_column_sorts_and_reports(tmp_path):
    # hand-made irregular hourly series: unsorted, one duplicate, one two-hour gap
    rows = [
        ("2024-01-01 03:00", 3),
        ("2024-01-01 00:00", 0),
        ("2024-01-01 01:00", 1),
        ("2024-01-01 02:00", 2),
        ("2024-01-01 02:00", 20),
        ("2024-01-01 06:00", 6),
    ]
    path = tmp_path / "load.csv"
    path.write_text("when,mw\n" + "\n".join(f"{t},{v}" for t, v in rows) + "\n")
    rec = read_series(path, "mw", time_column="when")
    np.testing.assert_array_equal(rec.samples.numpy(), [0, 1, 2, 20, 3, 6])
    r = rec.time_report
    assert (r.was_sorted, r.n_duplicates, r.n_gaps, r.missing_steps, r.step_s) == (False, 1, 1, 2, 3600.0)
    assert str(r.duplicates[0]).startswith("2024-01-01T02:00")
    assert r.gaps[0][2] == 2 and not r.regular
    assert rec.sampling_rate == pytest.approx(1 / 3600)
    first = read_series(path, "mw", time_column="when", duplicates="first")
    np.testing.assert_array_equal(first.samples.numpy(), [0, 1, 2, 3, 6])
    mean = read_series(path, "mw", time_column="when", duplicates="mean")
    np.testing.assert_array_equal(mean.samples.numpy(), [0, 1, 11, 3, 6])
    assert mean.timestamps.shape == (5,)
    with pytest.raises(ReadError, match="1 duplicate timestamp.*duplicates=first") as raised:
        read_series(path, "mw", time_column="when", duplicates="error")
    # on the command line in its words (it had said "pass duplicates='first'" there too)
    assert "--duplicates first" in raised.value.cli_message and "duplicates=" not in raised.value.cli_message
    # everything but the time column when no column is named
    assert read_series(path, time_column="when").channels == ("mw",)


def test_time_format_and_bad_times(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("Datetime,v\n10/12/2004 23:00,1\n10/13/2004 0:00,2\n")  # the 13: month first for sure
    rec = read_series(path, "v", time_column="Datetime")
    assert str(rec.timestamps_numpy()[0]).startswith("2004-10-12T23:00")
    bad = tmp_path / "bad.csv"
    bad.write_text("Datetime,v\nyesterday,1\n")
    with pytest.raises(ReadError, match="time column 'Datetime'.*time_format="):
        read_series(bad, "v", time_column="Datetime")


def test_nan_policies(tmp_path, device):
    x = np.array([1.0, np.nan, np.nan, 4.0, 5.0, np.nan], dtype=np.float32)
    path = tmp_path / "n.npy"
    np.save(path, x)
    with pytest.raises(
        ReadError, match=r"3 non-finite value\(s\) \(3 NaN or empty, 0 inf.*the first at sample 1.*nan='drop'"
    ):
        read_series(path, device=device)
    dropped = read_series(path, nan="drop", device=device)
    np.testing.assert_array_equal(dropped.samples.cpu().numpy(), [1, 4, 5])
    assert dropped.n_nan == 3
    interp = read_series(path, nan="interpolate", device=device)
    valid = ~np.isnan(x)
    expected = np.interp(np.arange(6), np.flatnonzero(valid), x[valid])  # holds the edge value past the end
    np.testing.assert_allclose(interp.samples.cpu().numpy(), expected, rtol=1e-6)
    # empty CSV cells are NaN too
    csv = tmp_path / "holes.csv"
    csv.write_text("v\n1\n\n3\n")  # a blank line is skipped by CSV parsers; use an empty field instead
    csv.write_text("v,w\n1,0\n,0\n3,0\n")
    np.testing.assert_array_equal(read_series(csv, "v", nan="interpolate").samples.numpy(), [1, 2, 3])


@pytest.mark.parametrize(
    ("values", "n_nan"),
    [
        ([3e38, 3e38, 1.0], 0),  # the sum overflows to inf: still every value is finite
        ([np.inf, -np.inf, 2.0], 2),  # infinities are non-finite samples too
        ([3e38, 3e38, np.nan], 1),
        ([np.inf, np.nan, 2.0], 2),
    ],
)
def test_nan_count_with_infinities_and_overflow(tmp_path, values, n_nan):
    path = tmp_path / "big.npy"
    np.save(path, np.array(values, dtype=np.float32))
    rec = read_series(path, nan="drop")
    assert rec.n_nan == n_nan
    assert rec.samples.numel() == 3 - n_nan


def test_nan_interpolation_uses_timestamps(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("t,v\n2024-01-01 00:00,0\n2024-01-01 01:00,\n2024-01-01 04:00,8\n")
    rec = read_series(path, "v", time_column="t", nan="interpolate")
    np.testing.assert_allclose(rec.samples.numpy(), [0, 2, 8])


@pytest.mark.parametrize(
    ("content", "kwargs", "pattern"),
    [
        ("a,b\n1,2\n", {"column": "hearbeats"}, r"column 'hearbeats' not found in .*columns are \['a', 'b'\]"),
        ("a,b\n1,2\n", {"column": 5}, "column 5 is out of range"),
        ("a\n1\n2\nx7\n4\n", {}, r"non-numeric value 'x7' in column 'a' of .* at line 4"),
        ("", {}, "is empty"),
        ("a,b\n", {}, "has no samples"),
        ("a\nnan\nnan\n", {}, "holds no finite value"),
        # one lead not recorded among others, whatever the policy (drop had left no time point,
        # interpolate said "nothing to interpolate", and error pointed to both)
        ("I,II\n1,nan\n2,nan\n", {}, r"channel 'II' of bad.csv holds no finite value .*read column='I'\."),
        ("I,II\n1,nan\n2,nan\n", {"nan": "drop"}, r"channel 'II' of bad.csv holds no finite value"),
        ("I,II,III\n1,nan,3\n2,nan,4\n", {"nan": "interpolate"}, r"read column='I' or the others\."),
        ("a\n1\n", {"nan": "zero"}, "nan='zero' is not a policy"),
        ("a\n1\n", {"column": "a", "channel": "a"}, "not both"),
    ],
)
def test_csv_errors_are_one_clear_line(tmp_path, content, kwargs, pattern):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ReadError, match=pattern) as info:
        read_series(path, **kwargs)
    assert "\n" not in str(info.value)


def test_path_errors(tmp_path):
    with pytest.raises(ReadError, match="file not found"):
        read_series(tmp_path / "missing.csv")
    (tmp_path / "x.xlsx").write_text("")
    with pytest.raises(ReadError, match=r"unknown format '.xlsx'.*use .csv"):
        read_series(tmp_path / "x.xlsx")
    with pytest.raises(ReadError, match="WFDB header not found"):
        read_series(tmp_path / "rec.hea")
    (tmp_path / "broken.parquet").write_text("not parquet")
    with pytest.raises(ReadError, match="not a readable Parquet"):
        read_series(tmp_path / "broken.parquet")
    write_parquet({"s": np.array(["a", "b"])}, tmp_path / "s.parquet")
    with pytest.raises(ReadError, match="holds string, not numbers"):
        read_series(tmp_path / "s.parquet")
    np.save(tmp_path / "c.npy", np.exp(1j * np.arange(3000) / 50))  # complex: no ECG is
    for source in (tmp_path / "c.npy", np.exp(1j * np.arange(3000) / 50)):
        with pytest.raises(ReadError, match=r"holds complex numbers, not real numbers; .*np.real\(x\)"):
            read_series(source, sampling_rate=250)
    (tmp_path / "short.hea").write_text("short 2 250 5000\nshort.dat 16 200 16 0 0 0 0 I\n")  # one signal line of two
    with pytest.raises(ReadError, match=r"short.hea declares 2 signal\(s\) but describes 1; it is incomplete"):
        read_series(tmp_path / "short.hea")
    (tmp_path / "none.hea").write_text("none 0 250\n")
    with pytest.raises(ReadError, match="none.hea declares no signal"):
        read_series(tmp_path / "none")


def test_wfdb_written_record(tmp_path):
    wfdb = pytest.importorskip("wfdb")
    sig = np.stack([np.sin(np.linspace(0, 6, 500)), np.cos(np.linspace(0, 6, 500))], axis=1)
    wfdb.wrsamp(
        "rec", fs=250, units=["mV", "mV"], sig_name=["I", "II"], p_signal=sig, fmt=["16", "16"], write_dir=str(tmp_path)
    )
    ref = wfdb.rdrecord(str(tmp_path / "rec"))
    for source in (tmp_path / "rec", tmp_path / "rec.hea", tmp_path / "rec.dat"):
        rec = read_series(source)
        assert rec.samples.shape == (2, 500) and rec.sampling_rate == 250 and rec.channels == ("I", "II")
        assert rec.units == ("mV", "mV")
        np.testing.assert_allclose(rec.samples.numpy(), ref.p_signal.T, rtol=1e-6, atol=1e-7)
    ii = read_series(tmp_path / "rec", channel="II")
    assert ii.samples.shape == (500,) and ii.channels == ("II",)
    np.testing.assert_array_equal(read_series(tmp_path / "rec", channel=1).samples.numpy(), ii.samples.numpy())
    with pytest.raises(ReadError, match=r"channel 'V5' not found in rec; channels are \['I', 'II'\]"):
        read_series(tmp_path / "rec", channel="V5")
    # channels by position are read in one pass; what that pass refuses is explained as before
    with pytest.raises(ReadError, match=r"channel 2 is out of range in rec; there are 2: \['I', 'II'\]"):
        read_series(tmp_path / "rec", channel=2)
    with pytest.raises(ReadError, match=r"start=500 is past the end of rec \(500 samples\)"):
        read_series(tmp_path / "rec", channel=0, start=500)
    tail = read_series(tmp_path / "rec", channel=0, start=100, stop=10_000)  # a stop past the end: to the end
    np.testing.assert_allclose(tail.samples.numpy(), ref.p_signal[100:, 0], rtol=1e-6, atol=1e-7)
    assert read_series(tmp_path / "rec", channel=-1).channels == ("II",)


def test_writers_round_trip(tmp_path):
    x = torch.arange(6, dtype=torch.float32)
    write_csv({"x": x, "y": x * 2}, tmp_path / "o.csv")
    np.testing.assert_array_equal(read_series(tmp_path / "o.csv", "y").samples.numpy(), (x * 2).numpy())
    write_parquet({"m": x.reshape(3, 2)}, tmp_path / "m.parquet")
    assert pq.read_table(tmp_path / "m.parquet").column("m").to_pylist() == [[0, 1], [2, 3], [4, 5]]
    write_json({"device": torch.device("cpu"), "n": np.int64(3)}, tmp_path / "s.json")
    assert (tmp_path / "s.json").read_text().count("cpu") == 1


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "sub" / "out.parquet"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"partial")
        raise RuntimeError("interrupted")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []
    # an existing file is only replaced once the new one is complete
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("new, half")
        raise RuntimeError
    assert target.read_text() == "old"


def test_staged_dir_is_all_or_nothing(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(RuntimeError), staged_dir(out) as stage:
        (stage / "a.txt").write_text("1")
        raise RuntimeError("interrupted")
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with staged_dir(out) as stage:
        (stage / "a.txt").write_text("first")
    assert (out / "a.txt").read_text() == "first"
    with pytest.raises(RuntimeError), staged_dir(out) as stage:
        (stage / "a.txt").write_text("second, half")
        raise RuntimeError
    assert (out / "a.txt").read_text() == "first" and [p.name for p in tmp_path.iterdir()] == ["run"]
    with staged_dir(out) as stage:
        (stage / "a.txt").write_text("second")
        (stage / "b.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["a.txt", "b.txt"] and (out / "a.txt").read_text() == "second"


def test_read_series_takes_polars_jax_and_chunked_arrow():
    pl = pytest.importorskip("polars")
    s = pl.Series("ecg", np.arange(20, dtype=np.float32))
    rec = read_series(s)
    assert rec.channels == ("ecg",) and shares_memory(rec.samples, s)
    chunked = pa.chunked_array([np.arange(5.0), np.arange(5.0, 10.0)])
    np.testing.assert_array_equal(read_series(chunked).samples.numpy(), np.arange(10.0))
    jnp = pytest.importorskip("jax.numpy")
    j = jnp.arange(12, dtype=jnp.float32)
    rec = read_series(j)
    assert rec.samples.data_ptr() == j.unsafe_buffer_pointer()


@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)])
def test_outputs_follow_the_umask(tmp_path, umask, file_mode, dir_mode):
    previous = os.umask(umask)
    try:
        write_json({"a": 1}, tmp_path / "one.json")
        with staged_dir(tmp_path / "run") as stage:
            write_npy(np.zeros(3), stage / "m.npy")
        plain = tmp_path / "plain.txt"
        plain.write_text("x")  # what any program makes under this umask
    finally:
        os.umask(previous)
    assert stat.S_IMODE(plain.stat().st_mode) == file_mode
    assert stat.S_IMODE((tmp_path / "one.json").stat().st_mode) == file_mode
    assert stat.S_IMODE((tmp_path / "run" / "m.npy").stat().st_mode) == file_mode
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == dir_mode


def test_reference_beats_from_tables(tmp_path):
    sim = simulate_ecg(60, 250, seed=2)
    _, truth = write_simulated_ecg(sim, tmp_path / "ecg.csv")
    ref = read_reference(truth)  # the simulator's own truth file: sample, time_s, symbol
    assert ref.times_s is None and np.array_equal(ref.samples_at(250), sim.r_peaks.numpy())
    # seconds only: converted once the recording's rate is known (a column name in any case)
    times = np.array([2.0, 0.5, 1.25])
    pq.write_table(pa.table({"Time_S": times}), tmp_path / "t.parquet")
    assert read_reference(tmp_path / "t.parquet").samples_at(360).tolist() == [180, 450, 720]
    write_csv({"when": times}, tmp_path / "bad.csv")
    with pytest.raises(ReadError, match=r"bad.csv has no column of R peaks; its columns are \['when'\]"):
        read_reference(tmp_path / "bad.csv")
    write_csv({"sample": np.array([1.5, 3.0])}, tmp_path / "frac.csv")
    with pytest.raises(ReadError, match="holds fractions, not sample indices"):
        read_reference(tmp_path / "frac.csv")
    with pytest.raises(ReadError, match="reference file not found"):
        read_reference(tmp_path / "missing.csv")
    # a header and no row (it had said the column held "null with 0 empty value(s)")
    (tmp_path / "none.csv").write_text("sample,symbol\n")
    with pytest.raises(ReadError, match=r"none.csv lists no beat; give a reference with one beat a row"):
        read_reference(tmp_path / "none.csv")


def test_reference_days_from_tables(tmp_path):
    sim = simulate_load(60, n_anomalies=5, seed=4)
    _, truth = write_simulated_load(sim, tmp_path / "load.csv")
    ref = read_reference_days(truth)  # the simulator's own truth file: day, kind
    assert np.array_equal(ref.times, sim.anomalous_days.astype("datetime64[ns]"))
    assert ref.kinds.tolist() == list(sim.anomaly_kinds) and ref.source == "load.truth.csv"
    # any case, times within a day, unsorted, no kind column: sorted, each "listed"
    (tmp_path / "d.csv").write_text("Date\n2021-03-04 18:30:00\n2021-03-01\n")
    ref = read_reference_days(tmp_path / "d.csv")
    assert [str(t)[:16] for t in ref.times] == ["2021-03-01T00:00", "2021-03-04T18:30"]
    assert ref.kinds.tolist() == ["listed", "listed"]
    # a Parquet table of timestamps under another name: its first column of times
    stamps = np.array(["2021-05-02T00:00", "2021-05-01T00:00"], dtype="datetime64[ns]")
    pq.write_table(pa.table({"when": stamps, "label": ["storm", None]}), tmp_path / "d.parquet")
    ref = read_reference_days(tmp_path / "d.parquet")
    assert [str(t)[:10] for t in ref.times] == ["2021-05-01", "2021-05-02"]
    assert ref.kinds.tolist() == ["listed", "storm"]
    cases = [
        ("n.csv", "sample\n1\n", r"n.csv has no column of days; its columns are \['sample'\]"),
        ("t.csv", "day\nyesterday\n", "cannot parse column 'day' of t.csv as ISO 8601 times"),
        ("e.csv", "day,kind\n", "lists no days"),
        ("g.csv", "day,kind\n2021-01-01,x\n,y\n", "column 'day' of g.csv has 1 empty value"),
        ("f.csv", "day\n3.5\n", r"column 'day' of f.csv holds double, not times"),
        ("x.atr", "", "is not a table of days"),
        ("missing.csv", None, "reference file not found"),
    ]
    for name, text, pattern in cases:
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(ReadError, match=pattern):
            read_reference_days(tmp_path / name)


def test_which_sources_declare_their_sampling_rate(tmp_path):
    write_parquet({"ecg": np.zeros(10, dtype=np.float32)}, tmp_path / "rated.parquet", sampling_rate=250)
    write_parquet({"ecg": np.zeros(10, dtype=np.float32)}, tmp_path / "plain.parquet")
    write_csv({"ecg": np.zeros(10)}, tmp_path / "x.csv")
    assert declares_sampling_rate(tmp_path / "rated.parquet") is True
    assert declares_sampling_rate(tmp_path / "plain.parquet") is False
    assert declares_sampling_rate(tmp_path / "x.csv") is False
    assert declares_sampling_rate(str(tmp_path / "x.npy")) is False
    assert declares_sampling_rate(np.zeros(10)) is None  # in memory: only reading tells


def test_beat_annotations_carry_scores_and_flags_and_read_back(tmp_path):
    import wfdb

    from devicepipe.io import write_beat_annotations

    samples = np.array([100, 460, 830, 1200])
    path = write_beat_annotations(
        tmp_path, "rec_1", samples, 360.0, scores=np.array([0.1, 2.5, np.nan, 0.2]), flags=np.array([0, 1, 0, 0], bool)
    )
    assert path == tmp_path / "rec_1.qrs" and sorted(p.name for p in tmp_path.iterdir()) == ["rec_1.qrs"]
    ann = wfdb.rdann(str(tmp_path / "rec_1"), "qrs")
    np.testing.assert_array_equal(ann.sample, samples)
    assert ann.symbol == ["N"] * 4 and list(ann.num) == [0, 1, 0, 0]
    assert ann.aux_note == ["score 0.1", "flagged, score 2.5", "not scored", "score 0.2"]
    assert write_beat_annotations(tmp_path, "empty", np.zeros(0, np.int64), 360.0) is None


@pytest.mark.parametrize("block", [1, 7, 65_536])
@pytest.mark.parametrize("kind", ["plain", "scores", "flags", "both"])
def test_beat_annotations_are_the_bytes_wfdb_wrann_writes(tmp_path, monkeypatch, block, kind):
    # written a block of beats at a time (block 1 and 7 cut through the num changes, the long
    # gaps that need SKIP words and the NaN scores); the file must be wrann's, byte for byte
    import wfdb

    from devicepipe.io import write_beat_annotations

    monkeypatch.setattr("devicepipe.io.wfdb.ANNOTATION_BLOCK", block)
    rng = np.random.default_rng(block)
    n = 300
    samples = np.sort(rng.integers(0, 2_000, n).cumsum() + rng.integers(0, 5_000))  # gaps past 1023 samples too
    scores = rng.random(n) if kind in ("scores", "both") else None
    if scores is not None:
        scores[rng.random(n) < 0.1] = np.nan
    flags = rng.random(n) < 0.3 if kind in ("flags", "both") else None
    ours = write_beat_annotations(tmp_path, "rec", samples, 250.0, scores=scores, flags=flags)
    notes = None
    if scores is not None:
        marked = np.zeros(n, bool) if flags is None else flags
        notes = [f"{'flagged, ' if f else ''}score {v:.4g}" if np.isfinite(v) else "not scored"
                 for v, f in zip(scores, marked, strict=True)]  # fmt: skip
    (tmp_path / "wrann").mkdir()
    wfdb.wrann("rec", "qrs", samples, symbol=["N"] * n, num=None if flags is None else flags.astype(np.int64),
               aux_note=notes, fs=250.0, write_dir=str(tmp_path / "wrann"))  # fmt: skip
    assert ours.read_bytes() == (tmp_path / "wrann" / "rec.qrs").read_bytes()


def test_beat_annotations_refuse_samples_out_of_order(tmp_path):
    from devicepipe.io import write_beat_annotations

    with pytest.raises(ValueError, match="increasing"):
        write_beat_annotations(tmp_path, "rec", np.array([10, 5]), 250.0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("part", [1, 3, 65_536])
def test_the_beat_table_written_in_parts_holds_each_beat_once(tmp_path, monkeypatch, part):
    # a week's beats are written TABLE_PART rows at a time: the seams must not drop, repeat or
    # change a row (the interval before a part's first beat comes from the part before)
    import pyarrow.csv as pacsv

    from devicepipe.artifacts import write as outputs

    monkeypatch.setattr(outputs, "TABLE_PART", part)
    fs = 250.0
    peaks = np.array([30, 260, 470, 700, 950, 1210, 1400], dtype=np.int64)
    kept = np.array([0, 1, 1, 1, 1, 1, 0], dtype=bool)
    quality = (np.linspace(0.1, 0.7, 7).astype(np.float32), np.full(7, 0.5, np.float32))
    outputs.write_beat_files(tmp_path, "rec", peaks, kept, fs, quality=quality)
    rr = np.array([np.nan, 230, 210, 230, 250, 260, 190]) / fs  # by hand
    for table in (pq.read_table(tmp_path / "beats.parquet"), pacsv.read_csv(tmp_path / "beats.csv")):
        np.testing.assert_array_equal(table["peak"].to_numpy(), peaks)
        np.testing.assert_allclose(table["time_s"].to_numpy(), peaks / fs)
        np.testing.assert_allclose(table["rr_s"].to_numpy(), rr)
        np.testing.assert_array_equal(table["kept"].to_numpy(zero_copy_only=False), kept)
        np.testing.assert_allclose(table["quality"].to_numpy(), quality[0], rtol=1e-6)
    assert pq.read_schema(tmp_path / "beats.parquet").metadata[b"devicepipe.sampling_rate"] == b"250.0"
    assert (tmp_path / "beats.csv").read_text().count("\n") == peaks.size + 1  # one header


def test_random_bytes_are_not_taken_for_wfdb_annotations(tmp_path):
    import wfdb

    rng = np.random.default_rng(50)  # bytes that wfdb.rdann decodes as 1,240 "beats" without a word
    garbage = tmp_path / "garbage.atr"
    garbage.write_bytes(rng.bytes(int(rng.integers(100, 20_000))))
    with pytest.raises(
        ReadError, match=r"garbage.atr is not a WFDB annotation file: it does not end with the end mark"
    ):
        read_reference(garbage)
    samples = np.array([100, 460, 820], dtype=np.int64)
    wfdb.wrann("rec", "atr", samples, symbol=["N", "V", "N"], write_dir=str(tmp_path), fs=360)
    whole = tmp_path / "rec.atr"
    ref = read_reference(whole)  # what wfdb writes is read
    assert ref.samples.tolist() == samples.tolist() and ref.symbols.tolist() == ["N", "V", "N"]
    cut = tmp_path / "cut.atr"
    cut.write_bytes(whole.read_bytes()[:-2])  # the same file cut short
    with pytest.raises(ReadError, match="cut.atr is not a WFDB annotation file"):
        read_reference(cut)


@pytest.mark.parametrize("span", [None, (100, 700)])
def test_a_parquet_page_that_contradicts_the_file_s_statistics_is_refused(tmp_path, span):
    x = np.sin(np.arange(1000) / 10).astype(np.float32)
    path = tmp_path / "ecg.parquet"
    pq.write_table(pa.table({"ecg": x}), path, compression="none", use_dictionary=False, row_group_size=400)
    assert np.array_equal(read_series(path, sampling_rate=100).samples.numpy(), x)  # untouched: read as written
    raw = bytearray(path.read_bytes())
    at = raw.find(x[500].tobytes())  # a value of the second row group, changed after the file was written
    raw[at : at + 4] = np.float32(1e6).tobytes()
    path.write_bytes(bytes(raw))
    assert pq.read_table(path).column("ecg").to_numpy().max() == 1e6  # Parquet itself reads it as data
    kwargs = {} if span is None else {"start": span[0], "stop": span[1]}
    with pytest.raises(
        ReadError, match=r"ecg.parquet is damaged: column 'ecg' of row group 1 holds values .* to 1e\+06"
    ):
        read_series(path, sampling_rate=100, **kwargs)


def test_the_row_group_check_reads_what_pyarrow_compute_reads():
    # the statistics check reads each row group through NumPy when it has no nulls: the same least
    # and greatest values as pyarrow.compute.min_max, NaN and nulls left out as Parquet leaves them
    import pyarrow.compute as pc

    from devicepipe.io.tables import _min_max

    rng = np.random.default_rng(7)
    x = rng.normal(size=1000).astype(np.float32)
    with_nan = x.copy()
    with_nan[[3, 500]] = np.nan
    cases = [
        pa.chunked_array([x]),
        pa.chunked_array([with_nan]),
        pa.chunked_array([np.full(5, np.nan, np.float32)]),
        pa.chunked_array([rng.integers(-(2**40), 2**40, 300)]),
        pa.chunked_array([pa.array([1.5, None, -2.0, 7.0])]),
        pa.chunked_array([x[:400], x[400:]]),
        pa.chunked_array([x]).slice(100, 50),
    ]
    for values in cases:
        low, high = pc.min_max(values).values()
        expected = (low.as_py(), high.as_py()) if low.is_valid else (None, None)
        if expected[0] is not None and np.isnan(expected[0]):  # pyarrow's answer on NaN, if it gave one
            expected = (None, None)
        assert _min_max(values) == expected, values.type
    assert _min_max(pa.chunked_array([with_nan])) == (float(np.nanmin(with_nan)), float(np.nanmax(with_nan)))
    assert _min_max(pa.chunked_array([pa.array([], pa.float32())])) == (None, None)


@pytest.mark.parametrize("block", [1, 7, 65_536])
@pytest.mark.parametrize("scored", [False, True])
def test_beat_classes_and_rhythm_changes_are_the_bytes_wfdb_wrann_writes(tmp_path, monkeypatch, block, scored):
    # each beat its AAMI class as its symbol; a rhythm annotation ("+", the rhythm in its note)
    # before the first beat and at every change, as MIT-BIH's files hold them
    import wfdb

    from devicepipe.io import write_beat_annotations

    monkeypatch.setattr("devicepipe.io.wfdb.ANNOTATION_BLOCK", block)
    rng = np.random.default_rng(block)
    n = 200
    samples = np.sort(rng.integers(50, 400, n).cumsum())
    symbols = rng.choice(list("NNNNSVFQ"), n)
    rhythms = np.repeat(rng.choice(["(N", "(AFIB", "(B", "(VT"], 12), -(-n // 12))[:n]
    flags = rng.random(n) < 0.3 if scored else None
    scores = rng.random(n) if scored else None
    ours = write_beat_annotations(tmp_path, "rec", samples, 250.0, scores=scores, flags=flags, symbols=symbols,
                                  rhythms=rhythms)  # fmt: skip
    at, symbol, num, notes, last = [], [], [], [], None
    for i in range(n):
        if rhythms[i] != last:
            last = rhythms[i]
            at, symbol, num, notes = [*at, samples[i]], [*symbol, "+"], [*num, 0], [*notes, last]
        at.append(samples[i])
        symbol.append(symbols[i])
        num.append(int(flags[i]) if scored else 0)
        notes.append(f"{'flagged, ' if flags[i] else ''}score {scores[i]:.4g}" if scored else "")
    (tmp_path / "wrann").mkdir()
    wfdb.wrann("rec", "qrs", np.array(at), symbol=symbol, num=np.array(num), aux_note=notes, fs=250.0,
               write_dir=str(tmp_path / "wrann"))  # fmt: skip
    assert ours.read_bytes() == (tmp_path / "wrann" / "rec.qrs").read_bytes()
    back = wfdb.rdann(str(tmp_path / "rec"), "qrs")
    beats = np.array(back.symbol) != "+"
    assert list(np.array(back.symbol)[beats]) == list(symbols)
    assert [note for s, note in zip(back.symbol, back.aux_note, strict=True) if s == "+"][:2] == [rhythms[0],
        rhythms[np.flatnonzero(rhythms != rhythms[0])[0]]]  # fmt: skip


def test_beat_annotations_past_a_32_bit_gap_are_the_bytes_wfdb_wrann_writes(tmp_path):
    # a gap over 2**31 - 1 samples needs two SKIP words (a week at 10 kHz has 6 G samples)
    import wfdb

    from devicepipe.io import write_beat_annotations

    samples = np.array([5, 900, 2_000, 2**31 + 2_100, 2**31 + 2_500, 2**32 + 9_000], dtype=np.int64)
    symbols = np.array(["N", "V", "N", "S", "N", "N"])
    ours = write_beat_annotations(tmp_path, "rec", samples, 10_000.0, symbols=symbols)
    (tmp_path / "wrann").mkdir()
    wfdb.wrann("rec", "qrs", samples, symbol=list(symbols), fs=10_000.0, write_dir=str(tmp_path / "wrann"))
    assert ours.read_bytes() == (tmp_path / "wrann" / "rec.qrs").read_bytes()


def test_table_columns_equal_pyarrow_s_own_and_import_no_pandas(tmp_path):
    # numbers, booleans and text become the Arrow arrays pyarrow.array makes of them; NaN stays
    # NaN (not null); in a fresh process, writing a beats-like table imports no pandas
    import subprocess
    import sys

    import pyarrow as pa

    from devicepipe.io.write import arrow_column

    cases = [
        np.arange(5, dtype=np.int64),
        np.array([1.5, np.nan, -0.0]),
        np.array([1.5, 2.5], dtype=np.float32),
        np.array([True, False, True] * 7),
        np.array(["N", "V\u00e9", ""]),
        np.array(["a", "bc"], dtype=object),
        np.arange(10, dtype=np.int32)[::3],
        np.array([], dtype=bool),
    ]
    for value in cases:
        ours, theirs = arrow_column(value), pa.array(value)
        ours.validate(full=True)
        assert ours.type == theirs.type
        assert str(ours.to_pylist()) == str(theirs.to_pylist())  # (NaN compared as text)
    mixed = np.array(["a", None], dtype=object)
    assert arrow_column(mixed) is mixed  # left to pyarrow
    code = (
        "import sys, numpy as np\n"
        "from devicepipe.io.write import write_csv, write_parquet\n"
        "cols = {'peak': np.arange(9), 'rr_s': np.full(9, np.nan), 'kept': np.ones(9, bool)}\n"
        "cols['class'] = np.array(['N'] * 9)\n"
        "write_parquet(cols, sys.argv[1] + '/b.parquet'); write_csv(cols, sys.argv[1] + '/b.csv')\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert (tmp_path / "b.csv").read_text().splitlines()[:2] == ['"peak","rr_s","kept","class"', '0,nan,true,"N"']
