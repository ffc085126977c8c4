"""Arrays held on disk a part at a time, and the exact median of values that come in parts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devicepipe.core.spill import Spill
from devicepipe.signal.blocks import lower_median_of_parts, median_of_parts


def test_spilled_parts_read_back_by_any_range():
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=k).astype(np.float32) for k in (5, 0, 17, 1, 40)]
    whole = np.concatenate(parts)
    with Spill() as spill:
        for p in parts:
            spill.append("x", torch.from_numpy(p))
            spill.append("i", torch.from_numpy(p > 0))
        assert spill.size("x") == whole.size and spill.size("missing") == 0
        for a, b in ((0, whole.size), (3, 9), (5, 6), (22, 63), (60, 10**6), (40, 40)):
            np.testing.assert_array_equal(spill.read("x", a, b).numpy(), whole[a:b])
            np.testing.assert_array_equal(spill.read("i", a, b).numpy(), whole[a:b] > 0)
        assert spill.read("x").dtype == torch.float32 and spill.read("i").dtype == torch.bool
        np.testing.assert_array_equal(torch.cat(list(spill.parts("x", 7))).numpy(), whole)
        with pytest.raises(TypeError, match="float32"):
            spill.append("x", torch.zeros(2, dtype=torch.float64))


def test_a_mapped_name_holds_every_value_appended_and_outlives_the_spill():
    rng = np.random.default_rng(1)
    parts = [rng.integers(-(2**40), 2**40, size=k) for k in (3, 70_000, 0, 9)]  # past the write buffer
    with Spill() as spill:
        for p in parts:
            spill.append("x", torch.from_numpy(p))
        spill.append("empty", torch.zeros(0, dtype=torch.bool))
        mapped = spill.mapped("x")  # (the last part still waits in the buffer: written first)
        empty = spill.mapped("empty")
        with pytest.raises(KeyError, match="missing"):
            spill.mapped("missing")
    whole = np.concatenate(parts)
    assert mapped.dtype == np.int64 and mapped.shape == whole.shape
    np.testing.assert_array_equal(mapped, whole)  # read after the spill closed its files
    assert empty.dtype == np.bool_ and empty.shape == (0,)
    mapped[0] = 7  # copy on write: the caller may change its copy
    assert mapped[0] == 7 and torch.from_numpy(mapped)[1] == whole[1]


def test_spilled_files_leave_nothing_behind_even_when_the_process_is_killed(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    script = (
        "import os, signal, torch\n"
        "from devicepipe.core.spill import Spill\n"
        "spill = Spill()\n"
        "for _ in range(4):\n"
        "    spill.append('x', torch.zeros(100_000))\n"
        "assert spill.read('x').numel() == 400_000\n"
        "print(len(os.listdir(os.environ['TMPDIR'])), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, "TMPDIR": str(tmp_path)}
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert proc.stdout.strip() == "0"  # no file of it is visible while it runs
    assert not list(tmp_path.iterdir())  # nor once it is killed


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["normal", "ties", "zeros", "negative", "wide", "inf"])
def test_the_median_of_parts_is_numpys_lower_median(dtype, kind):
    g = torch.Generator().manual_seed(1)
    for n in (1, 2, 3, 10, 1001, 40_000):
        x = torch.randn(n, generator=g, dtype=dtype)
        if kind == "ties":
            x = torch.randint(-3, 4, (n,), generator=g).to(dtype)
        elif kind == "zeros":
            x = torch.zeros(n, dtype=dtype)
        elif kind == "negative":
            x = -x.abs() - 1e-30
        elif kind == "wide":  # subnormal, huge and ordinary values, both signs
            x = x * torch.tensor([1e-40, 1e30, 1.0], dtype=dtype)[torch.randint(0, 3, (n,), generator=g)]
        elif kind == "inf":
            x[:: max(1, n // 3)] = torch.inf
        parts = list(x.split(max(1, n // 7)))
        ordered = np.sort(x.numpy())
        for held in (0, 5, n):  # by selection over the parts, or (all values held) by torch's median
            got = lower_median_of_parts(lambda parts=parts: iter(parts), held=held)
            assert got.dtype == dtype and float(got) == float(ordered[(n - 1) // 2]), (n, kind, held)
            assert median_of_parts(lambda parts=parts: iter(parts), held=held) == float(np.median(x.numpy()))


def test_the_median_of_parts_refuses_no_values_and_integers():
    with pytest.raises(ValueError, match="no values"):
        lower_median_of_parts(lambda: iter([torch.zeros(0)]))
    with pytest.raises(TypeError, match="float32 or float64"):
        lower_median_of_parts(lambda: iter([torch.arange(3)]))
