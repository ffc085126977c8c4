"""Zero-copy claims proved two ways: by pointer (shares_memory) and by mutation through the source's own API."""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import torch

from conftest import leaves_imported
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.interop import (
    CopyRefusedError,
    ReadOnlyMemoryWarning,
    convert,
    count_transfers,
    from_torch,
    library_of,
    shares_memory,
    to_torch,
)
from devicepipe.io import write_parquet
from devicepipe.pipelines import run_beats
from devicepipe.simulate import simulate_ecg

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

CPU_KINDS = ["torch", "numpy", "pyarrow", "pandas", "polars"] + (
    ["jax"] if "jax" in sys.modules or __import__("importlib").util.find_spec("jax") else []
)


def _pointer(obj):
    """The data address each library reports itself (not through devicepipe)."""
    lib = library_of(obj)
    if lib == "torch":
        return obj.data_ptr()
    if lib == "numpy":
        return obj.__array_interface__["data"][0]
    if lib == "pyarrow":
        return obj.buffers()[1].address + obj.offset * obj.type.byte_width
    if lib == "pandas":
        return obj.to_numpy().__array_interface__["data"][0]
    if lib == "polars":
        return obj.to_arrow().buffers()[1].address
    if lib == "jax":
        return obj.unsafe_buffer_pointer()
    raise AssertionError(lib)


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_from_torch_shares_and_back(kind):
    t = torch.arange(1000, dtype=torch.float32)
    obj = from_torch(t, kind)
    assert library_of(obj) == kind
    assert _pointer(obj) == t.data_ptr()
    back = convert(obj)
    assert not back.copied and back.tensor.data_ptr() == t.data_ptr()
    assert shares_memory(obj, t)
    t[7] = -1.0  # behavioural proof: a write through torch is seen by the other library
    assert float(np.asarray(obj)[7] if kind != "polars" else obj[7]) == -1.0


@pytest.mark.parametrize(
    ("make", "mutate"),
    [
        (lambda: np.arange(50, dtype=np.float32), lambda a: a.__setitem__(3, 99.0)),
        # through pandas' own setter: since pandas 3.1, Series.to_numpy() hands out a read-only view
        (lambda: pd.Series(np.arange(50, dtype=np.float64)), lambda s: s.iloc.__setitem__(3, 99.0)),
    ],
)
def test_mutating_the_source_shows_in_torch(make, mutate):
    src = make()
    t = to_torch(src, allow_copy=False)
    mutate(src)
    assert float(t[3]) == 99.0


def test_arrow_slices_and_table_columns_are_views():
    arr = pa.array(np.arange(100, dtype=np.float64))
    sliced = arr.slice(10, 20)
    t = to_torch(sliced, allow_copy=False)
    assert t.shape == (20,) and float(t[0]) == 10.0 and t.data_ptr() == _pointer(sliced)
    table = pa.table({"x": arr})
    assert to_torch(table.column("x"), allow_copy=False).data_ptr() == _pointer(arr)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: pa.array([1.0, None, 3.0]), "null"),
        (lambda: pa.chunked_array([[1.0, 2.0], [3.0]]), "2 chunks"),
        (lambda: pa.array([True, False]), "bit-packed"),
        (lambda: pd.Series([1.0, None], dtype="Float32"), "nullable dtype Float32"),
        (lambda: pl.Series([1.0, None]), "null"),
        (lambda: np.arange(10.0)[::-1], "negative strides"),
        (lambda: np.arange(4, dtype=np.uint32), "no torch equivalent"),
        (lambda: [1.0, 2.0], "no shareable buffer"),
    ],
)
def test_copies_are_explained_and_can_be_refused(make, reason):
    result = convert(make())
    assert result.copied and reason in result.reason
    with pytest.raises(CopyRefusedError, match=reason):
        to_torch(make(), allow_copy=False)


def test_nulls_become_nan_when_copying():
    out = to_torch(pa.array([1.0, None, 3.0]))
    assert torch.isnan(out[1]) and float(out[2]) == 3.0
    np.testing.assert_array_equal(to_torch(pd.Series([1, None], dtype="Int64")).numpy(), [1.0, np.nan])


def test_other_device_is_a_refusable_copy():
    t = torch.arange(3.0)
    with pytest.raises(CopyRefusedError, match="on cpu, not meta"):
        to_torch(t, device="meta", allow_copy=False)
    assert to_torch(t, device="meta").device.type == "meta"


def test_unsupported_inputs_are_clear():
    with pytest.raises(DevicepipeError, match="pick one column"):
        to_torch(pd.DataFrame({"a": [1.0]}))
    with pytest.raises(DevicepipeError, match="not numeric"):
        to_torch(pa.array(["a"]))
    with pytest.raises(DevicepipeError, match="cannot convert"):
        to_torch(object())
    with pytest.raises(DevicepipeError, match="unknown kind"):
        from_torch(torch.zeros(2), "arrow2")
    with pytest.raises(DevicepipeError, match="1-D"):
        from_torch(torch.zeros(2, 2), "pandas")
    with pytest.raises(CopyRefusedError, match="contiguous"):
        from_torch(torch.arange(10.0)[::2], "pyarrow", allow_copy=False)


def test_library_detection_imports_nothing():
    code = (
        "import sys\n"
        "from devicepipe.core.interop import library_of\n"
        "F = type('Series', (), {'__module__': 'polars.series.series'})\n"
        "G = type('ndarray', (), {'__module__': 'cupy._core.core'})\n"
        "print(library_of(F()), library_of(G()), 'polars' in sys.modules, 'cupy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["polars", "cupy", "False", "False"]
    assert library_of(3) == "unknown"


def test_shares_memory_by_extent():
    base = torch.arange(100.0)
    assert shares_memory(base[10:20], base[15:30])
    assert not shares_memory(base[:10], base[10:20])
    assert shares_memory(base.numpy()[::3], base)
    assert not shares_memory(base, base.clone())


def test_ledger_counts_nothing_on_the_cpu():
    x = torch.randn(10_000)
    with count_transfers() as ledger:
        y = (x.to("cpu") * 2).sum().item()
        z = x.cpu().clone()
    assert ledger.to_dict() == {
        "host_to_device": 0,
        "host_to_device_bytes": 0,
        "device_to_host": 0,
        "device_to_host_bytes": 0,
        "other": 0,
    }
    assert y == pytest.approx(float(x.sum()) * 2, rel=1e-4) and z.shape == x.shape


def test_ledger_sees_copies_between_devices():
    # the meta device exercises the same dispatch path as a GPU on a machine without one
    x = torch.randn(1000)
    with count_transfers() as ledger:
        x.to("meta")
        torch.empty(10, device="meta").copy_(x[:10])
    assert ledger.other == 2
    assert [(e[0], e[1], e[2]) for e in ledger.events] == [("cpu", "meta", 4000), ("cpu", "meta", 40)]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_ledger_counts_cuda_transfers():
    x = torch.randn(1000)
    with count_transfers() as ledger:
        g = x.cuda()
        s = float(g.sum())
        back = g.cpu()
    assert ledger.host_to_device == 1 and ledger.host_to_device_bytes == 4000
    assert ledger.device_to_host == 2 and ledger.device_to_host_bytes == 4000 + 4
    assert s == pytest.approx(float(back.sum()), rel=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
@pytest.mark.parametrize("kind", ["cupy", "numba", "jax", "cudf"])
def test_gpu_conversions_share_memory(kind):
    pytest.importorskip({"numba": "numba.cuda"}.get(kind, kind))
    t = torch.arange(1000, dtype=torch.float32, device="cuda")
    obj = from_torch(t, kind)
    back = convert(obj)
    assert not back.copied and back.tensor.device.type == "cuda"
    assert back.tensor.data_ptr() == t.data_ptr()
    t[5] = -3.0
    assert float(to_torch(obj)[5]) == -3.0


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_beats_pipeline_moves_the_recording_once(tmp_path):
    sim = simulate_ecg(600, 250, seed=1)
    write_parquet({"ecg": sim.signal}, tmp_path / "e.parquet", sampling_rate=250)
    result = run_beats(tmp_path / "e.parquet", tmp_path / "out", device="cuda", figures=False)
    ledger = result.transfers
    assert ledger.host_to_device == 1 and ledger.host_to_device_bytes == sim.signal.numel() * 4
    # back come only the results (peaks, kept flags, beat matrix) and a few scalars
    results = result.peaks.nbytes + result.beats.kept.numel() + result.beats.matrix.numel() * 4
    assert results <= ledger.device_to_host_bytes <= results + 4096


def test_counting_transfers_does_not_load_the_compiler():
    # torch's wrapper around a dispatch mode imports torch._dynamo at its first call: about
    # a second of every command's start on the CPU, for a compiler nothing here uses
    code = (
        "import torch\n"
        "from devicepipe.core.interop import count_transfers\n"
        "with count_transfers() as ledger:\n"
        "    float((torch.ones(3) * 2).sum())\n"
        "assert ledger.device_to_host == 0\n"
    )
    assert not leaves_imported(code, "torch._dynamo")


@pytest.mark.parametrize(
    ("make", "owner"),
    [
        (lambda: pa.array(np.arange(50, dtype=np.float64)), "pyarrow DoubleArray"),
        (lambda: pl.Series(np.arange(50, dtype=np.float64)), "polars Series"),
        (lambda: np.frombuffer(np.arange(50, dtype=np.float64).tobytes()), "numpy ndarray"),  # read-only
    ],
)
def test_memory_its_owner_keeps_read_only_is_shared_with_a_warning(make, owner):
    src = make()
    with pytest.warns(ReadOnlyMemoryWarning, match=f"read-only memory of a {owner}; do not write to it in place"):
        t = to_torch(src, allow_copy=False)
    assert convert(src).read_only and shares_memory(src, t)  # shared, as promised: not copied to be safe


def test_pandas_copy_on_write_columns_are_read_only_where_pandas_says_so():
    column = pd.Series(np.arange(50, dtype=np.float64))
    read_only = not column.to_numpy().flags.writeable  # pandas' own answer: True from pandas 3 on
    assert convert(column).read_only == read_only
    if read_only:
        shallow = column.copy(deep=False)  # pandas promises this is independent of a later write to column
        with pytest.warns(ReadOnlyMemoryWarning):
            t = to_torch(column)
        t[0] = -1.0  # what the warning warns of: a write in place reaches the shallow copy too
        assert shallow.iloc[0] == -1.0


def test_writable_arrays_and_copies_come_without_a_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ReadOnlyMemoryWarning)
        to_torch(np.arange(10.0))
        to_torch(pa.array([1.0, None, 3.0]))  # nulls: a copy, which is the caller's to write
        to_torch(pa.chunked_array([[1.0], [2.0]]))
        # shares_memory only looks: `devicepipe bench`'s handoff printed the warning through it
        column = pa.array(np.arange(50, dtype=np.float64))
        assert convert(column).read_only and shares_memory(column, convert(column).tensor)


def test_a_table_is_refused_by_name_everywhere():
    table = pa.table({"a": [1.0, 2.0]})
    with pytest.raises(DevicepipeError, match=r"pick one column of the pyarrow Table"):
        shares_memory(table, torch.zeros(3))
    with pytest.raises(DevicepipeError, match=r"pick one column of the pyarrow RecordBatch"):
        to_torch(table.to_batches()[0])
