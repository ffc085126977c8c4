"""The interop matrix behind ``devicepipe interop``: every installed pair, zero-copy or not, and how long.

Sources and targets meet through torch: source -> :func:`~devicepipe.core.interop.convert` ->
:func:`~devicepipe.core.interop.from_torch` -> target. A pair is ``zero-copy`` when the target
shares the source's memory (checked by pointer), ``copy`` when it does not, and
``unsupported`` when a library is missing or its device is absent.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from devicepipe.bench.timer import measure
from devicepipe.core.interop import KINDS, convert, from_torch, shares_memory

__all__ = ["PairResult", "installed_kinds", "interop_matrix", "handoff_comparison"]

_GPU_KINDS = ("cupy", "cudf", "numba")
_MODULES = {"numba": "numba.cuda"}


@dataclass(frozen=True)
class PairResult:
    source: str
    target: str
    status: str  # "zero-copy", "copy" or "unsupported"
    seconds: float | None
    note: str = ""


def installed_kinds() -> list[str]:
    """The kinds of :data:`~devicepipe.core.interop.KINDS` usable on this machine."""
    found = []
    cuda = torch.cuda.is_available()
    for kind in KINDS:
        if kind in _GPU_KINDS and not cuda:
            continue
        try:
            mod = importlib.import_module(_MODULES.get(kind, kind))
        except Exception:
            continue
        if kind == "numba" and not mod.is_available():
            continue
        found.append(kind)
    return found


def _source(kind: str, n: int) -> Any:
    device = "cuda" if kind in _GPU_KINDS else "cpu"
    base = torch.arange(n, dtype=torch.float32, device=device)
    return base if kind == "torch" else from_torch(base, kind)


def interop_matrix(
    n: int = 100_000_000,
    kinds: list[str] | None = None,
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
) -> list[PairResult]:
    """Convert a float32 array of ``n`` elements from every kind to every kind; time and classify each."""
    kinds = kinds or installed_kinds()
    note = progress or (lambda _m: None)
    results = []
    for src_kind in kinds:
        src = _source(src_kind, n)
        for dst_kind in kinds:
            note(f"{src_kind} -> {dst_kind}")

            def run(src: Any = src, dst_kind: str = dst_kind) -> Any:
                return from_torch(convert(src).tensor, dst_kind)

            try:
                timing = measure(run, device="cuda" if torch.cuda.is_available() else "cpu", repeats=repeats)
                out = run()
                shared = shares_memory(src, out)
                results.append(PairResult(src_kind, dst_kind, "zero-copy" if shared else "copy", timing.median_s))
            except Exception as exc:
                results.append(PairResult(src_kind, dst_kind, "unsupported", None, f"{type(exc).__name__}: {exc}"))
        del src
    return results


def handoff_comparison(n: int = 100_000_000, device: str | None = None, repeats: int = 3) -> dict[str, Any]:
    """The RAPIDS seed's comparison: a column reaching torch through the host vs handed over in place.

    On a GPU with cuDF the column is a cuDF Series (CuPy without cuDF); on the CPU a pandas
    Series. ``naive`` goes to host NumPy, then ``torch.from_numpy(...).float().to(device)``
    (the notebook's ``as_matrix`` route, with the modern ``to_numpy``); ``handoff`` is
    :func:`~devicepipe.core.interop.to_torch` (DLPack / array interface, no copy).
    """
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    base = torch.rand(n, dtype=torch.float32, device=dev)
    if dev.type == "cuda":
        kind = "cudf" if "cudf" in installed_kinds() else "cupy"
    else:
        kind = "pandas"
    column = from_torch(base, kind)

    def to_host(col: Any) -> np.ndarray:
        if kind == "cupy":
            return col.get()
        return col.to_numpy().copy() if kind == "pandas" else col.to_numpy()

    def naive() -> torch.Tensor:
        return torch.from_numpy(to_host(column)).float().to(dev)

    def handoff() -> torch.Tensor:
        return convert(column).tensor

    def same(t: torch.Tensor) -> None:
        if not torch.equal(t, base):
            raise AssertionError("the conversion changed the data")

    slow = measure(naive, device=dev, repeats=repeats, check=same)
    fast = measure(handoff, device=dev, repeats=repeats, check=same)
    return {
        "device": str(dev),
        "source": kind,
        "elements": n,
        "naive_host_round_trip": slow.to_dict(),
        "zero_copy_handoff": fast.to_dict(),
        "handoff_shares_memory": shares_memory(column, handoff()),
        "speedup": slow.median_s / max(fast.median_s, 1e-9),
    }
