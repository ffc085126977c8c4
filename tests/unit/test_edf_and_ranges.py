"""EDF/EDF+/BDF input through edfio, and reading part of a recording (start/stop) in every format."""

from __future__ import annotations

import edfio
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import wfdb
from typer.testing import CliRunner

from conftest import require_data
from devicepipe.cli import app
from devicepipe.core.errors import DevicepipeError
from devicepipe.io import SAMPLING_RATE_KEY, read_reference, read_series

runner = CliRunner()


def write_edf(path, signals, rate, labels=None, annotations=(), bdf=False, physical=(-5.0, 5.0)):
    """An EDF+ (or BDF+) file written by edfio itself, the reading library's own writer; each
    signal is padded with zeros to whole 1-s data records, as EDF stores them."""
    labels = labels or [f"ECG{i}" for i in range(len(signals))]
    rates = rate if isinstance(rate, (list, tuple)) else [rate] * len(signals)
    make = edfio.BdfSignal if bdf else edfio.EdfSignal
    made = []
    for signal, label, r in zip(signals, labels, rates, strict=True):
        data = np.asarray(signal, dtype=np.float64)
        data = np.pad(data, (0, -data.size % int(r)))
        made.append(make(data, float(r), label=label, physical_dimension="mV", physical_range=physical))
    notes = [edfio.EdfAnnotation(onset, None, text) for onset, text in annotations]
    (edfio.Bdf if bdf else edfio.Edf)(made, annotations=notes).write(path)
    return path


def test_mitdb_100_round_trips_through_edf_within_its_resolution(tmp_path):
    base = require_data("mitdb/100")
    rec = wfdb.rdrecord(str(base))
    ann = wfdb.rdann(str(base), "atr")
    path = write_edf(
        tmp_path / "100.edf",
        rec.p_signal.T,
        rec.fs,
        labels=rec.sig_name,
        annotations=[(s / rec.fs, sym) for s, sym in zip(ann.sample, ann.symbol, strict=True)],
    )
    edf = read_series(path, "MLII", dtype=torch.float64)
    whole = read_series(base, "MLII", dtype=torch.float64)
    assert edf.sampling_rate == 360.0 and edf.channels == ("MLII",) and edf.units == ("mV",)
    step = 10.0 / 65535  # one digital step of the file's -5..5 mV range in 16 bits
    # EDF holds whole data records (1 s here): the last one is padded past the recording's end
    assert edf.n_samples == -(-whole.n_samples // 360) * 360  # zeros to the end of the last record
    diff = (edf.samples[: whole.n_samples] - whole.samples).abs().max().item()
    assert diff <= step, diff
    ref = read_reference(path)  # EDF+ annotations with beat symbols are reference beats
    beats = np.isin(ann.symbol, list("NLRBAaJSVrFejnE/fQ?"))
    np.testing.assert_array_equal(ref.samples_at(360.0), ann.sample[beats])
    np.testing.assert_array_equal(ref.symbols, np.asarray(ann.symbol)[beats])


def test_bdf_and_channel_choice(tmp_path):
    t = np.arange(2000) / 200
    path = write_edf(tmp_path / "x.bdf", [np.sin(t), np.cos(t)], 200, labels=["I", "II"], bdf=True)
    rec = read_series(path, "II", dtype=torch.float64)
    step = 10.0 / (2**24 - 1)
    assert rec.channels == ("II",) and abs(rec.samples - torch.from_numpy(np.cos(t))).max() <= step


def test_signals_at_different_rates_must_be_chosen_one_rate(tmp_path):
    path = write_edf(tmp_path / "mixed.edf", [np.zeros(2500), np.zeros(250)], [250, 25], labels=["ECG", "ACC"])
    with pytest.raises(DevicepipeError, match="different rates .*ECG at 250 Hz, ACC at 25 Hz"):
        read_series(path)
    assert read_series(path, "ACC").sampling_rate == 25.0


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ("truncated", "not a readable EDF/BDF file"),
        ("garbage", "not a readable EDF/BDF file"),
        ("empty", "holds 0 bytes, under the 256 of the fixed header"),
        ("cut in the header", "holds 100 bytes, under the 256 of the fixed header"),
        ("negative record duration", "data record duration of -1 s, so its signals have no sampling rate"),
        ("zero record duration", "data record duration of 0 s"),
        # its signals' headers cut short (edfio's error for it: "list index out of range")
        ("cut in the signal headers", r"declares 2 signal\(s\), whose headers take 768 bytes, but the file holds 300"),
    ],
)
def test_a_damaged_edf_is_one_line_and_exit_2(tmp_path, damage, says):
    path = write_edf(tmp_path / "ok.edf", [np.sin(np.arange(5000) / 40)], 250)
    data = path.read_bytes()
    bad = tmp_path / f"{damage.replace(' ', '_')}.edf"
    bad.write_bytes(
        {
            "truncated": data[: len(data) // 2],
            "garbage": b"0       " + bytes(range(256)) * 4,
            "empty": b"",
            "cut in the header": data[:100],
            # the fixed header's data record duration, bytes 244-251 (the rate is samples / duration)
            "negative record duration": data[:244] + b"-1      " + data[252:],
            "zero record duration": data[:244] + b"0       " + data[252:],
            "cut in the signal headers": data[:300],
        }[damage]
    )
    with pytest.raises(DevicepipeError, match=says):
        read_series(bad)
    for chunk in ([], ["--chunk", "10s"]):  # the chunked reader takes the rate from the header too
        result = runner.invoke(app, ["beats", str(bad), "--out", str(tmp_path / "out"), *chunk])
        assert result.exit_code == 2
        assert result.stderr.count("\n") == 1 and "not a readable EDF/BDF file" in result.stderr
        assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- start / stop


@pytest.fixture
def signal():
    return np.sin(np.arange(10_000) / 17.0).astype(np.float32) + np.arange(10_000, dtype=np.float32) * 1e-4


def _files(tmp_path, x):
    """The same samples in every format that supports a partial read."""
    csv = tmp_path / "x.csv"
    csv.write_text("ecg\n" + "\n".join(repr(float(v)) for v in x) + "\n")
    parquet = tmp_path / "x.parquet"  # many row groups, so that a range spans several
    table = pa.table({"ecg": x}).replace_schema_metadata({SAMPLING_RATE_KEY: "250"})
    pq.write_table(table, parquet, row_group_size=700)
    npy = tmp_path / "x.npy"
    np.save(npy, x)
    edf = write_edf(tmp_path / "x.edf", [x], 250, physical=(-2.0, 3.0))
    wfdb.wrsamp("rec", fs=250, units=["mV"], sig_name=["ecg"], p_signal=x[:, None].astype(np.float64),
                write_dir=str(tmp_path), fmt=["32"], adc_gain=[1e6], baseline=[0])  # fmt: skip
    return {"csv": csv, "parquet": parquet, "npy": npy, "edf": edf, "wfdb": tmp_path / "rec"}


def test_an_edf_whose_header_gives_its_number_of_records_as_unknown_is_read_whole(tmp_path):
    # EDF allows -1 data records (a recorder that did not write the count when it closed the file):
    # its records are read as the file holds them, whole and in chunks (it had been "truncated")
    x = np.sin(np.arange(5000) / 40)
    path = write_edf(tmp_path / "ok.edf", [x], 250)
    data = path.read_bytes()
    unknown = tmp_path / "unknown.edf"
    unknown.write_bytes(data[:236] + b"-1      " + data[244:])  # the fixed header's count, bytes 236-243
    np.testing.assert_array_equal(read_series(unknown).samples.numpy(), read_series(path).samples.numpy())
    np.testing.assert_array_equal(read_series(unknown, start=1000, stop=3000).samples.numpy(),
                                  read_series(path, start=1000, stop=3000).samples.numpy())  # fmt: skip
    # a count the file falls short of is still a file cut short
    short = tmp_path / "short.edf"
    short.write_bytes(data[: -250 * 2 * 3])  # three 1-s records of 250 two-byte samples gone
    with pytest.raises(DevicepipeError, match="it is truncated"):
        read_series(short)


@pytest.mark.parametrize("kind", ["csv", "parquet", "npy", "edf", "wfdb"])
@pytest.mark.parametrize(("start", "stop"), [(0, 1), (699, 701), (1234, 9000), (9990, None), (5000, 10**9)])
def test_a_range_equals_the_slice_of_the_whole(tmp_path, signal, kind, start, stop):
    path = _files(tmp_path, signal)[kind]
    whole = read_series(path, sampling_rate=250)
    part = read_series(path, sampling_rate=250, start=start, stop=stop)
    assert part.start_sample == start
    torch.testing.assert_close(part.samples, whole.samples[start:stop], rtol=0, atol=0)


def test_a_range_in_durations_needs_the_rate_before_reading(tmp_path, signal):
    files = _files(tmp_path, signal)
    part = read_series(files["wfdb"], start="2s", stop="3s")  # the header says 250 Hz
    assert (part.start_sample, part.n_samples) == (500, 250)
    assert read_series(files["parquet"], start="10s").start_sample == 2500  # devicepipe's metadata
    with pytest.raises(DevicepipeError, match="rate is not known before reading"):
        read_series(files["csv"], start="2s")
    assert read_series(files["csv"], start="2s", sampling_rate=100).start_sample == 200


@pytest.mark.parametrize(
    ("start", "stop", "message"),
    [(-1, None, "sample index"), (5, 5, "must come after"), (20_000, None, "past the end"), ("x", None, "duration")],
)
def test_bad_ranges_are_refused(tmp_path, signal, start, stop, message):
    path = _files(tmp_path, signal)["npy"]
    with pytest.raises(DevicepipeError, match=message):
        read_series(path, sampling_rate=250, start=start, stop=stop)


def test_npy_rows_reads_the_rows_asked_for(tmp_path):
    from devicepipe.io.chunks import npy_rows

    matrix = np.arange(70 * 9, dtype=np.float32).reshape(70, 9)
    np.save(tmp_path / "m.npy", matrix)
    n, width, read = npy_rows(tmp_path / "m.npy")
    assert (n, width) == (70, 9)
    np.testing.assert_array_equal(read([(3, 7)]).numpy(), matrix[3:7])
    np.testing.assert_array_equal(read([(0, 1), (69, 70), (10, 12)]).numpy(), matrix[[0, 69, 10, 11]])
    with open(tmp_path / "m.npy", "r+b") as fh:  # cut short: the last row's last value gone
        fh.truncate(fh.seek(0, 2) - 4)
    np.testing.assert_array_equal(read([(0, 69)]).numpy(), matrix[:69])
    with pytest.raises(DevicepipeError, match="ends before row 70: the file is cut short"):
        read([(65, 70)])


@pytest.mark.parametrize(
    ("array", "column"),
    [
        (np.linspace(-1, 1, 5000, dtype=np.float32), None),
        (np.linspace(-1, 1, 5000, dtype=np.float64), 0),
        ((np.arange(15000).reshape(3, 5000) % 977 - 400).astype(np.int16), 2),  # (channels, time), a later row
        ((np.arange(15000).reshape(3, 5000) % 977 - 400).astype(np.int16), "ch1"),
        (np.asfortranarray(np.arange(10000, dtype=np.float32).reshape(2, 5000)), 1),  # read_series' path
        (np.linspace(-1, 1, 5000).astype(">f8"), None),  # big-endian: read_series' path
    ],
)
def test_chunks_of_an_npy_file_equal_read_series_ranges(tmp_path, array, column):
    # NPY chunks are read with the header parsed once and a positioned read per chunk; each must be
    # exactly read_series' range of the same file (values, dtype, channel)
    from devicepipe.io.chunks import chunk_reader

    path = tmp_path / "x.npy"
    np.save(path, array)
    read, n, fs = chunk_reader(path, column, sampling_rate=100.0)
    assert (n, fs) == (5000, 100.0)
    for start, stop in ((0, 1), (0, 5000), (1234, 1300), (4999, 5000)):
        expected = read_series(path, 0 if column is None else column, start=start, stop=stop, sampling_rate=100.0)
        got = read(start, stop)
        assert got.dtype == expected.samples.dtype == torch.float32
        torch.testing.assert_close(got, expected.samples, rtol=0, atol=0)
    with pytest.raises(DevicepipeError, match="ch7"):
        chunk_reader(path, "ch7", sampling_rate=100.0)[0](0, 10)  # (read_series's path: at the first read)


def test_the_npy_format_s_chunk_reader_reads_the_first_channel_when_none_is_named(tmp_path):
    # the format's own reader took None for a list of channels and raised a TypeError
    from devicepipe.io.formats.npy import NpyFormat

    array = (np.arange(15000).reshape(3, 5000) % 977 - 400).astype(np.int16)
    np.save(tmp_path / "x.npy", array)
    read = NpyFormat().chunk_reader(tmp_path / "x.npy", None, "cpu", torch.float32)
    assert read is not None
    torch.testing.assert_close(read(10, 20), torch.as_tensor(array[0, 10:20], dtype=torch.float32), rtol=0, atol=0)


def test_an_edf_signal_without_a_physical_range_is_one_warning_of_our_own(tmp_path):
    from devicepipe.simulate import simulate_ecg

    sim = simulate_ecg(60, 250, seed=3)
    path = write_edf(tmp_path / "flat.edf", [sim.signal.numpy()], 250, physical=(-5.0, 5.0))
    raw = bytearray(path.read_bytes())
    n = int(raw[252:256].decode())  # signals in the file (the annotations' signal included)
    at = 256 + n * (16 + 80 + 8)  # the physical minima, 8 bytes a signal, then the maxima
    raw[at + n * 8 : at + n * 8 + 8] = raw[at : at + 8]  # the first signal's maximum := its minimum
    path.write_bytes(bytes(raw))
    result = runner.invoke(app, ["beats", str(path), "--out", str(tmp_path / "o"), "--no-figures"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        "warning: signal 'ECG0' of flat.edf has no physical range (its minimum equals its maximum): its values are "
        "the file's digital units, not calibrated ones; beats are found, but amplitudes mean nothing"
    ]


def test_a_discontinuous_edf_is_refused_not_joined_over_its_gaps(tmp_path):
    from devicepipe.core.errors import ReadError

    path = write_edf(tmp_path / "d.edf", [np.sin(np.arange(2500) / 40)], 250, annotations=[(1.0, "x")])
    data = bytearray(path.read_bytes())
    assert data[192:197] == b"EDF+C"
    data[192:197] = b"EDF+D"  # discontinuous allowed, but its records still back to back: read as before
    (tmp_path / "contiguous.edf").write_bytes(bytes(data))
    assert read_series(tmp_path / "contiguous.edf").n_samples == 2500
    at = bytes(data).find(b"+5\x14\x14\x00\x00\x00")  # the 6th record's onset: 905 s, a gap of 900 s
    data[at : at + 7] = b"+905\x14\x14\x00"
    (tmp_path / "gap.edf").write_bytes(bytes(data))
    with pytest.raises(ReadError, match="discontinuous EDF\\+ file .*EDF\\+D.*not back to back"):
        read_series(tmp_path / "gap.edf")
