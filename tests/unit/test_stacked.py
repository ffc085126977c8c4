"""Many short recordings read into one tensor (``read_stacked``): each row equal, bit for bit, to
``read_series`` of that recording with the same options, whichever way it was read (the plain WFDB
fast path, or read_series itself for anything else), and records that cannot share a stack
refused in one line."""

from pathlib import Path

import numpy as np
import pytest
import torch

import devicepipe as dp
from devicepipe.core.errors import ReadError
from devicepipe.io import read_series, read_stacked
from devicepipe.io.wfdb import import_wfdb

wfdb = import_wfdb()
FS = 500.0


def _record(root: Path, name: str, seed: int, fmt: str = "16", n_sig: int = 1, n: int = 2500, fs: float = FS) -> Path:
    """A WFDB record of ``n_sig`` leads written by wfdb itself; its ``.hea`` path."""
    ecg = dp.simulate_ecg(10.0, fs, seed=seed).signal.numpy().astype(np.float64)[:n]
    signals = np.stack([ecg * (1.0 + 0.3 * k) for k in range(n_sig)], axis=1) / (3.0 if fmt == "80" else 1.0)
    names = ["II", "V1", "V5"][:n_sig]
    wfdb.wrsamp(
        name, fs=fs, units=["mV"] * n_sig, sig_name=names, p_signal=signals, fmt=[fmt] * n_sig,
        adc_gain=[(20.0 if fmt == "80" else 200.0) * (k + 1) for k in range(n_sig)],  # (format 80 holds 8 bits)
        baseline=[k * 7 for k in range(n_sig)], write_dir=str(root),
    )  # fmt: skip
    return root / f"{name}.hea"


def _one_by_one(paths, column=None, **options) -> torch.Tensor:
    return torch.stack([read_series(p, column, **options).samples for p in paths])


@pytest.mark.parametrize("fmt", ["16", "212", "80", "24", "32"])
@pytest.mark.parametrize(("n_sig", "column"), [(1, None), (3, None), (3, "V1"), (3, ["V5", "II"]), (3, 2)])
def test_rows_equal_read_series_bit_for_bit(tmp_path, fmt, n_sig, column):
    paths = [_record(tmp_path, f"r{i}", seed=i, fmt=fmt, n_sig=n_sig) for i in range(4)]
    got = read_stacked(paths, column)
    expected = _one_by_one(paths, column)
    assert got.samples.shape == expected.shape and got.samples.dtype == torch.float32
    assert torch.equal(got.samples.view(torch.int32), expected.view(torch.int32))  # bit for bit
    first = read_series(paths[0], column)
    assert got.channels == first.channels and got.sampling_rate == first.sampling_rate == FS
    assert got.sources == ("r0", "r1", "r2", "r3") and got.n_records == 4 and got.n_samples == 2500


def test_records_named_without_a_suffix_read_as_their_headers(tmp_path, monkeypatch):
    paths = [_record(tmp_path, f"r{i}", seed=i, fmt="212", n_sig=3) for i in range(3)]
    named = [p.with_suffix("") for p in paths]  # as read_series takes a record: mitdb/100
    expected = _one_by_one(named, "V1")

    def not_here(*args, **kwargs):
        raise AssertionError("a plain record went through read_series")

    monkeypatch.setattr("devicepipe.io.stacked.read_series", not_here)  # the plain path, for every name
    for sources in (named, paths):
        got = read_stacked(sources, "V1")
        assert torch.equal(got.samples, expected) and got.sources == ("r0", "r1", "r2")


def test_other_formats_and_records_are_read_by_read_series(tmp_path):
    plain = _record(tmp_path, "plain", seed=1)
    # a record whose two signals are in two files is not plain: wfdb reads it
    ecg = dp.simulate_ecg(10.0, FS, seed=2).signal.numpy().astype(np.float64)[:2500]
    (tmp_path / "split").mkdir()
    wfdb.wrsamp(
        "split", fs=FS, units=["mV", "mV"], sig_name=["II", "V1"], p_signal=np.stack([ecg, ecg], 1),
        fmt=["16", "16"], adc_gain=[200.0, 200.0], baseline=[0, 0], write_dir=str(tmp_path / "split"),
    )  # fmt: skip
    header = (tmp_path / "split" / "split.hea").read_text().splitlines()
    (tmp_path / "split" / "split.dat").rename(tmp_path / "split" / "a.dat")
    data = np.fromfile(tmp_path / "split" / "a.dat", dtype="<i2").reshape(-1, 2)
    data[:, 0].tofile(tmp_path / "split" / "a.dat")
    data[:, 1].tofile(tmp_path / "split" / "b.dat")
    header[1] = header[1].replace("split.dat", "a.dat")
    header[2] = header[2].replace("split.dat", "b.dat")
    (tmp_path / "split" / "split.hea").write_text("\n".join(header) + "\n")
    split = tmp_path / "split" / "split.hea"
    npy = tmp_path / "n.npy"
    np.save(npy, read_series(plain, "II").samples.numpy())
    paths = [plain, split, npy]
    got = read_stacked(paths, 0, sampling_rate=FS)
    expected = _one_by_one(paths, 0, sampling_rate=FS)
    assert torch.equal(got.samples, expected)
    assert got.sources[0] == "plain"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("layout", "column"), [("time", None), ("channels", None), ("channels", "ch1"),
                                                ("rows", None), ("rows", [2, 0])])  # fmt: skip
def test_npy_arrays_are_read_directly_and_equal_read_series(tmp_path, monkeypatch, dtype, layout, column):
    g = np.random.default_rng(0)
    paths = []
    for i in range(3):
        values = g.standard_normal((3, 2500)) * 1e3 ** (i - 1)  # values of three sizes, each rounded to float32
        array = {"time": values[0], "channels": values, "rows": values.T.copy()}[layout]
        paths.append(tmp_path / f"a{i}.npy")
        np.save(paths[-1], array.astype(dtype))
    expected = _one_by_one(paths, column, sampling_rate=FS)
    names = read_series(paths[0], column, sampling_rate=FS).channels

    def not_here(*args, **kwargs):
        raise AssertionError("an array went through read_series")

    monkeypatch.setattr("devicepipe.io.stacked.read_series", not_here)
    got = read_stacked(paths, column, sampling_rate=FS)
    assert torch.equal(got.samples.view(torch.int32), expected.view(torch.int32))  # bit for bit
    assert got.channels == names and got.sources == ("a0.npy", "a1.npy", "a2.npy") and got.sampling_rate == FS


def test_npy_arrays_read_series_must_judge_go_to_it(tmp_path):
    g = np.random.default_rng(1)
    values = g.standard_normal((2, 2500)).astype(np.float32)
    with_nan = values.copy()
    with_nan[1, 7] = np.nan
    cases = {"ints.npy": (values * 100).astype(np.int16), "fortran.npy": np.asfortranarray(values),
             "big.npy": values.astype(">f4"), "nan.npy": with_nan}  # fmt: skip
    for name, array in cases.items():
        np.save(tmp_path / name, array)
    paths = [tmp_path / name for name in cases]
    got = read_stacked(paths, sampling_rate=FS, nan="interpolate")
    assert torch.equal(got.samples, _one_by_one(paths, sampling_rate=FS, nan="interpolate"))
    with pytest.raises(ReadError, match="NaN"):  # the NaN policy is read_series', as for one array
        read_stacked(paths, sampling_rate=FS)
    np.save(tmp_path / "whole.npy", values)
    (tmp_path / "cut.npy").write_bytes((tmp_path / "whole.npy").read_bytes()[:-10])  # shorter than its header says
    with pytest.raises(ReadError):
        read_stacked([tmp_path / "cut.npy"], sampling_rate=FS)
    with pytest.raises(ReadError, match="sampling"):  # an array states no rate
        read_stacked(paths[:1])


def test_missing_samples_follow_the_nan_policy(tmp_path):
    paths = [_record(tmp_path, f"r{i}", seed=i) for i in range(3)]
    dat = tmp_path / "r1.dat"
    stored = np.fromfile(dat, dtype="<i2")
    stored[[10, 11, 900]] = -(2**15)  # format 16's mark of a missing sample
    stored.tofile(dat)
    with pytest.raises(ReadError, match="non-finite"):
        read_stacked(paths)
    got = read_stacked(paths, nan="interpolate")
    assert torch.equal(got.samples, _one_by_one(paths, nan="interpolate"))
    assert torch.isfinite(got.samples).all()


@pytest.mark.parametrize(
    ("other", "said"),
    [
        ({"n": 2400}, "2,400 samples, where r0 has 2,500"),
        ({"fs": 250.0, "n": 2500}, "a sampling rate of 250 Hz, where r0 has 500 Hz"),
        ({"n_sig": 3}, "3 channel(s), where r0 has 1"),
    ],
)
def test_records_that_differ_are_refused_in_one_line(tmp_path, other, said):
    paths = [_record(tmp_path, "r0", seed=0), _record(tmp_path, "odd", seed=1, **other)]
    with pytest.raises(ReadError) as err:
        read_stacked(paths)
    message = str(err.value)
    assert "odd has " + said in message and "\n" not in message and "read_series" in message


def test_wrong_arguments_are_refused_as_read_series_refuses_them(tmp_path):
    path = _record(tmp_path, "r0", seed=0)
    for sources in ([], str(path)):
        with pytest.raises(ReadError, match="list of one or more"):
            read_stacked(sources)
    with pytest.raises(ReadError, match="states its sampling rate, 500 Hz"):
        read_stacked([path], sampling_rate=250.0)
    with pytest.raises(ReadError, match="channel"):
        read_stacked([path], "V6")
    with pytest.raises(ReadError, match="not found"):
        read_stacked([path, tmp_path / "gone.hea"])
    # the options are checked before any record is read, as read_series checks them
    for options, said in (({"sampling_rate": float("nan")}, "finite, positive"), ({"nan": "skip"}, "not a policy"),
                          ({"dtype": torch.int16}, "floating type")):  # fmt: skip
        with pytest.raises(ReadError, match=said):
            read_stacked([path], **options)


def test_device_and_dtype(tmp_path):
    paths = [_record(tmp_path, f"r{i}", seed=i) for i in range(2)]
    got = read_stacked(paths, device="cpu", dtype=torch.float64)
    assert got.samples.dtype == torch.float64 and got.samples.device.type == "cpu"
    assert torch.equal(got.samples, _one_by_one(paths, dtype=torch.float64))
