"""Plain WFDB records read without wfdb's header parse: the same values as ``wfdb.rdrecord``, bit
for bit, and anything not plain left to it."""

from pathlib import Path

import numpy as np
import pytest

from conftest import require_data
from devicepipe.core.errors import ReadError
from devicepipe.io import read_series
from devicepipe.io.wfdb import import_wfdb, wfdb_sampling_rate, wfdb_signal_names
from devicepipe.io.wfdb_plain import PLAIN_FORMATS, SIGNAL_DEFAULTS, plain_header, read_plain

wfdb = import_wfdb()

#: Each format's valid range of stored values (the smallest is its missing-sample mark).
RANGES = {"16": 15, "61": 15, "160": 15, "80": 7, "32": 31, "24": 23, "212": 11}


def _theirs(base: Path, channels=None, start=0, stop=None) -> wfdb.Record:
    return wfdb.rdrecord(str(base), channels=channels, return_res=32, sampfrom=start, sampto=stop)


def _same(base: Path, channels=None, start=0, stop=None) -> None:
    """Our read of ``base`` equals wfdb.rdrecord's: values bit for bit (NaN where it has NaN),
    names, units and rate."""
    head = plain_header(base)
    assert head is not None, f"{base.name} should be read as a plain record"
    ours = read_plain(head, channels, start, stop, base.name)
    rec = _theirs(base, channels, start, stop)
    expected = rec.p_signal.T
    got = ours.values.numpy()
    assert got.dtype == expected.dtype == np.float32
    assert got.shape == expected.shape
    assert np.array_equal(got.view(np.int32), expected.view(np.int32)) or np.array_equal(got, expected, equal_nan=True)
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    assert ours.names == list(rec.sig_name) and ours.units == list(rec.units)
    assert ours.sampling_rate == float(rec.fs)


def test_defaults_and_missing_marks_are_wfdbs():
    from wfdb.io import _header, _signal

    specs = _header.SIGNAL_SPECS["read_default"]
    assert {k: specs[k] for k in SIGNAL_DEFAULTS} == SIGNAL_DEFAULTS
    marks = {f: mark for f, (_, _, mark) in PLAIN_FORMATS.items()}
    assert marks == {f: _signal.INVALID_SAMPLE_VALUE[f] for f in PLAIN_FORMATS}


@pytest.mark.parametrize("fmt", sorted(PLAIN_FORMATS))
@pytest.mark.parametrize("n_sig", [1, 3])
def test_every_plain_format_reads_as_wfdb_reads_it(tmp_path, fmt, n_sig):
    rng = np.random.default_rng(int(fmt) + n_sig)
    bits = RANGES[fmt]
    n = 1001  # odd: format 212's last byte pair is half full
    digital = rng.integers(-(2**bits) + 1, 2**bits, size=(n, n_sig), dtype=np.int64)
    digital[[0, 7, n - 1], 0] = -(2**bits)  # missing samples (NaN)
    digital[5, -1] = 2**bits - 1
    units, names = ["mV", "uV", "mmHg"][:n_sig], ["II", "V1", "ABP"][:n_sig]
    gains, baselines = [200.0, 12.5, 1.0][:n_sig], [0, -13, 1024][:n_sig]
    base = tmp_path / "rec"
    if fmt in ("61", "160"):  # formats wfdb reads but does not write: the bytes by their definition
        stored = digital.astype(">i2") if fmt == "61" else (digital + 2**15).astype("<u2")
        (tmp_path / "rec.dat").write_bytes(stored.tobytes())
        fields = zip(gains, baselines, units, names, strict=True)
        lines = [f"rec {n_sig} 257.5 {n}"] + [f"rec.dat {fmt} {g}({b})/{u} 16 0 0 0 0 {x}" for g, b, u, x in fields]
        (tmp_path / "rec.hea").write_text("\n".join(lines) + "\n")
    else:
        wfdb.wrsamp(
            "rec", fs=257.5, units=units, sig_name=names, d_signal=digital.astype(np.int32), fmt=[fmt] * n_sig,
            adc_gain=gains, baseline=baselines, write_dir=str(tmp_path),
        )  # fmt: skip
    _same(base)
    _same(base, start=3, stop=998)  # an odd sample first: mid-pair in 212
    _same(base, channels=[n_sig - 1], start=1, stop=2)
    if n_sig == 1:  # read_series sees the missing samples
        assert read_series(base.with_suffix(".hea"), nan="drop").samples.shape == (n - 3,)


def _write_header(tmp_path: Path, signal_lines: list[str], record_line: str = "rec 1 360 8") -> Path:
    (tmp_path / "rec.dat").write_bytes(np.arange(-8, 8, dtype="<i2").tobytes())
    (tmp_path / "rec.hea").write_text(record_line + "\n" + "\n".join(signal_lines) + "\n")
    return tmp_path / "rec"


@pytest.mark.parametrize(
    "line",
    [
        "rec.dat 16 0 16 0 0 0 0 lead",  # a gain of 0 means 200
        "rec.dat 16 100 12 1024 0 0 0 lead",  # no baseline: the ADC zero; no units: mV
        "rec.dat 16 100(-3)/uV 16 0 0 0 0 lead I",  # units, a baseline, a name with a space
        "rec.dat 16 20.5 16 0",  # the name left out: wfdb reads it, not here (see below)
    ],
)
def test_header_defaults_are_wfdbs(tmp_path, line):
    base = _write_header(tmp_path, [line, line.replace("lead", "other")])
    base.with_suffix(".hea").write_text(base.with_suffix(".hea").read_text().replace(" 1 360", " 2 360"))
    if line.endswith("16 0"):  # no name: not plain, and read_series reads it through wfdb all the same
        assert plain_header(base) is None
        assert read_series(base, 0).samples.shape == (8,)
        return
    _same(base)


@pytest.mark.parametrize(
    "lines",
    [
        ["rec 1 360 8", "rec.dat 16x2 200 16 0 0 0 0 a"],  # two samples per frame
        ["rec 1 360 8", "rec.dat 16:1 200 16 0 0 0 0 a"],  # skew
        ["rec 1 360 8", "rec.dat 16+4 200 16 0 0 0 0 a"],  # byte offset
        ["rec 1 360 8", "rec.dat 8 200 16 0 0 0 0 a"],  # first differences
        ["rec 2 360 4", "rec.dat 16 200 16 0 0 0 0 a", "other.dat 16 200 16 0 0 0 0 b"],  # two files
        ["rec 1 360", "rec.dat 16 200 16 0 0 0 0 a"],  # no length
        ["rec 1", "rec.dat 16 200 16 0 0 0 0 a"],  # no rate (wfdb's 250 Hz)
        ["rec 2 360 8", "rec.dat 16 200 16 0 0 0 0 a"],  # a signal line missing
        ["rec 1 360 800", "rec.dat 16 200 16 0 0 0 0 a"],  # more samples than the file holds
    ],
)
def test_records_that_are_not_plain_are_left_to_wfdb(tmp_path, lines):
    base = _write_header(tmp_path, lines[1:], lines[0])
    head = plain_header(base)
    if lines[0] == "rec 1 360 800":  # the header is plain, the file too short for it
        assert head is not None and read_plain(head, None) is None
    else:
        assert head is None
    try:  # whatever wfdb makes of it, read_series says the same as before
        expected = _theirs(base, [0]).p_signal[:, 0]
    except Exception:  # noqa: BLE001
        with pytest.raises(ReadError):
            read_series(base, 0)
        return
    got = read_series(base, 0, nan="drop").samples.numpy()
    assert np.array_equal(got, expected[~np.isnan(expected)])


def test_header_helpers_answer_as_wfdb(tmp_path):
    base = _write_header(tmp_path, ["rec.dat 16 200 16 0 0 0 0 lead one"])
    assert wfdb_sampling_rate(base) == 360.0 == float(wfdb.rdheader(str(base)).fs)
    assert wfdb_signal_names(base) == ["lead one"] == wfdb.rdheader(str(base)).sig_name


@pytest.mark.parametrize(
    "record", ["mitdb/100", "cpsc2021/data_21_7", "cpsc2019/data_00014"]
)  # formats 212 (two leads), 16 and 16
def test_real_records_read_as_wfdb_reads_them(record):
    base = require_data(record)
    _same(base)
    length = plain_header(base).length
    _same(base, channels=[0], start=length // 3 + 1, stop=length - 5)
