import json

import numpy as np
import pyarrow
import pytest
import torch

from devicepipe.core.device import cuda_unavailable_reason, device_report, full_float32, resolve_device
from devicepipe.core.errors import DeviceError


def test_cpu_and_torch_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


def test_auto_follows_availability():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected


@pytest.mark.parametrize(
    ("spec", "hint"),
    [
        ("cuda0", "'cuda:0'"),
        ("gpu", "'cuda:0'"),
        ("gpu:1", "'cuda:1'"),
        ("cuda:x", "'cuda:0'"),
        ("tpu", "'auto', 'cpu'"),
    ],
)
def test_malformed_strings_suggest_the_fix(spec, hint):
    with pytest.raises(DeviceError, match="unknown device") as info:
        resolve_device(spec)
    assert hint in str(info.value)


def test_non_string_is_rejected():
    with pytest.raises(DeviceError, match="expected a string"):
        resolve_device(3)


def test_cuda_without_cuda_build(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(DeviceError) as info:
        resolve_device("cuda")
    message = str(info.value)
    # the library names its own argument; the command line's words are kept for the CLI
    assert "no CUDA support" in message and "device='cpu'" in message and "--" not in message
    assert "--device cpu" in info.value.cli_message


def test_cuda_build_without_driver(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "finds no CUDA driver or GPU" in cuda_unavailable_reason()
    with pytest.raises(DeviceError, match="finds no CUDA driver or GPU.*device='cpu'"):
        resolve_device("cuda:0")
    assert resolve_device("auto") == torch.device("cpu")


def test_index_past_last_gpu_lists_the_gpus(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"FakeGPU{i}")
    with pytest.raises(DeviceError) as info:
        resolve_device("cuda:3")
    assert "cuda:0 (FakeGPU0), cuda:1 (FakeGPU1)" in str(info.value)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)


def test_report_is_complete_and_serialisable():
    report = device_report()
    json.dumps(report)
    assert report["torch"]["version"] == torch.__version__
    assert report["cpu"]["torch_threads"] == torch.get_num_threads()
    assert report["cpu"]["logical_cores"] >= 1
    assert report["cuda"]["available"] == torch.cuda.is_available()
    assert len(report["gpus"]) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    names = {lib["name"]: lib for lib in report["libraries"]}
    assert {"CuPy", "cuDF", "Numba", "JAX", "Polars", "pandas", "PyArrow", "wfdb"} <= set(names)

    assert names["PyArrow"]["version"] == pyarrow.__version__ and names["PyArrow"]["works"]


def _conv_precision() -> str:
    conv = getattr(torch.backends.cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):
        return conv.fp32_precision
    return "tf32" if torch.backends.cudnn.allow_tf32 else "ieee"


def test_full_float32_turns_tf32_off_inside_and_restores_it():
    before = _conv_precision()
    with full_float32():
        assert _conv_precision() == "ieee"
    assert _conv_precision() == before

    @full_float32()
    def inside() -> str:
        raise ValueError(_conv_precision())

    with pytest.raises(ValueError, match="ieee"):
        inside()
    assert _conv_precision() == before  # restored after an exception too


def test_release_freed_memory_trims_the_heap_on_linux():
    import sys

    from devicepipe.core.device import release_freed_memory

    blocks = [bytearray(600_000) for _ in range(200)]  # mid-sized blocks, as chunked work frees them
    del blocks
    assert release_freed_memory() is sys.platform.startswith("linux")  # glibc here: the heap was trimmed


def test_all_finite_against_numpy_including_a_sum_that_overflows():
    from devicepipe.core.device import all_finite

    big = torch.full((10,), 3e38)  # finite values whose float32 sum is inf
    cases = [torch.zeros(5), big, torch.tensor([1.0, float("nan")]), torch.tensor([float("-inf"), 2.0]),
             big.clone().index_fill_(0, torch.tensor([7]), float("nan")), torch.arange(5), torch.zeros(0)]  # fmt: skip
    for x in cases:
        assert all_finite(x) is bool(np.isfinite(x.numpy()).all())


def test_all_finite_is_the_same_on_the_calling_thread_and_in_torchs_pool(monkeypatch):
    import warnings

    from devicepipe.core import device

    g = torch.Generator().manual_seed(0)
    cases = [torch.randn(1000, generator=g), torch.full((9,), 1e308, dtype=torch.float64), torch.randn(3, 8)[:, ::3]]
    for x in list(cases):
        for value in (float("nan"), float("inf"), float("-inf")):
            bad = x.clone()
            bad.view(-1)[bad.numel() // 2] = value
            cases.append(bad)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's overflow and NaN are answers, not warnings
        small = [device.all_finite(x) for x in cases]
    monkeypatch.setattr(device, "ONE_THREAD_CHECK", 0)  # every tensor through torch
    assert small == [device.all_finite(x) for x in cases] == [bool(torch.isfinite(x).all()) for x in cases]
    assert small.count(True) == 3
