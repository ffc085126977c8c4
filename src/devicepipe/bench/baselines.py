"""The tutorial notebooks' way, faithfully, on the CPU, for the same input as ours.

pandas ``read_csv``; scikit-learn's ``MinMaxScaler``; the notebook's FFT convolution with a
zero-embedded 30-tap Ricker kernel in NumPy; its window-180 non-maximum suppression kernel
compiled with Numba for the CPU (``prange`` over positions, the same per-window loop as the
CUDA kernel); its gates -> indices -> lengths step; zero padding of each beat in a Python
loop; a VAE epoch delivered by ``DataLoader``. These need the ``bench`` extra; a baseline
whose library is missing is skipped with a note.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch

from devicepipe.bench.stages import BenchInput, beats_for_training, require
from devicepipe.bench.timer import measure
from devicepipe.models import LightVAE, LightVAEConfig

__all__ = ["run_baselines", "seed_nms_numba", "seed_pipeline", "seed_taps"]


def _unscaled_taps(window: int) -> np.ndarray:
    t = np.linspace(-3, 3, window)
    return (np.exp(-0.5 * t**2) * (1 - t**2)).astype(np.float32)


def seed_taps(window: int = 30) -> np.ndarray:
    """The notebook's Ricker-like kernel of ``window`` taps, in its arithmetic (float32 shape,
    float64 scale)."""
    return 2 * _unscaled_taps(window) / np.sqrt(window)


def _seed_kernel(n: int, window: int = 30) -> np.ndarray:
    """The taps embedded at the start of ``n`` zeros, as the notebook's FFT convolution uses them."""
    kernel = np.zeros(n, dtype=np.float32)
    kernel[:window] = _unscaled_taps(window)
    return 2 * kernel / np.sqrt(window)


def seed_fftconv(signal: np.ndarray) -> np.ndarray:
    """``irfft(rfft(signal) * rfft(kernel))``: the notebook's (circular) FFT convolution."""
    return np.fft.irfft(np.fft.rfft(signal) * np.fft.rfft(_seed_kernel(len(signal))), n=len(signal))


_NMS: dict[str, Any] = {}


def seed_nms_numba(curvature: np.ndarray, window: int = 180) -> np.ndarray:
    """The notebook's ``segment_kernel`` on the CPU with Numba, then its run fix: gates as 0/1 int64."""
    if "fn" not in _NMS:
        import numba

        @numba.njit(parallel=True, cache=False)
        def kernel(signal: np.ndarray, window: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
            for position in numba.prange(signal.shape[0] - window + 1):
                accum = -math.inf
                for index in range(window):
                    value = signal[position + index]
                    accum = value if value > accum else accum
                out[position] = 1 if accum == signal[position + (window + 1) // 2] else 0

        _NMS["fn"] = kernel
    out = np.empty(curvature.shape[0] - window + 1, dtype=np.int64)
    _NMS["fn"](curvature, window, out)
    out[1:] *= np.diff(out) == 1
    return out


def seed_zero_padding(signal: np.ndarray, indices: np.ndarray, lower: int = 100, upper: int = 256) -> np.ndarray:
    """One beat at a time in a Python loop: the notebook's warp kernel, as a CPU user would write it."""
    rows = []
    for i in range(len(indices) - 1):
        length = indices[i + 1] - indices[i]
        if lower <= length <= upper:
            row = np.zeros(upper, dtype=signal.dtype)
            row[:length] = signal[indices[i] : indices[i] + length]
            rows.append(row)
    return np.stack(rows) if rows else np.zeros((0, upper), dtype=signal.dtype)


def seed_pipeline(csv: str, column: str = "heartbeats") -> np.ndarray:
    """The notebook's CSV-to-beat-matrix path on the CPU: pandas, NumPy FFT, Numba NMS, Python padding."""
    import pandas as pd

    signal = pd.read_csv(csv, dtype="float32")[column].to_numpy()
    curvature = seed_fftconv(signal)
    gates = seed_nms_numba(curvature, 180)
    indices = np.flatnonzero(gates == 1)
    return seed_zero_padding(signal, indices)


def run_baselines(
    inp: BenchInput,
    *,
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
    epoch_beats: torch.Tensor | None = None,
) -> list[dict[str, Any]]:
    """Time the notebooks' way on the CPU; each record names the stage of ours it stands against."""
    note = progress or (lambda _m: None)
    n = inp.n_samples
    records: list[dict[str, Any]] = []

    def add(name: str, ours: str, fn: Callable[[], Any], check: Callable[[Any], None] | None = None) -> None:
        note(f"notebook way: {name}")
        try:
            timing = measure(fn, device="cpu", repeats=repeats, check=check)
        except ImportError as exc:
            records.append({"baseline": name, "versus": ours, "skipped": f"{exc}"})
            return
        records.append({"baseline": name, "versus": ours, "n_samples": n, **timing.to_dict()})

    def read_pandas() -> np.ndarray:
        import pandas as pd

        return pd.read_csv(inp.csv, dtype="float32")["heartbeats"].to_numpy()

    add(
        "pandas.read_csv",
        "read_csv",
        read_pandas,
        lambda r: require(np.array_equal(r, inp.signal), "pandas read differs from the signal"),
    )

    def sk_minmax() -> np.ndarray:
        from sklearn.preprocessing import MinMaxScaler

        return MinMaxScaler().fit_transform(inp.signal.reshape(-1, 1)).reshape(-1)

    add("sklearn MinMaxScaler", "scale", sk_minmax)
    add("numpy FFT convolution", "filter", lambda: seed_fftconv(inp.signal))
    curvature = seed_fftconv(inp.signal)
    add("numba NMS kernel (window 180, CPU)", "peaks", lambda: seed_nms_numba(curvature, 180))
    try:
        gates = seed_nms_numba(curvature, 180)
        indices = np.flatnonzero(gates == 1)
        add("python-loop zero padding", "segment", lambda: seed_zero_padding(inp.signal, indices))
    except ImportError as exc:
        records.append({"baseline": "python-loop zero padding", "versus": "segment", "skipped": str(exc)})
    add("notebook CSV-to-beat-matrix pipeline", "pipeline", lambda: seed_pipeline(str(inp.csv)))

    beats = epoch_beats if epoch_beats is not None else beats_for_training(inp, torch.device("cpu"))

    def dataloader_epoch() -> float:

        torch.manual_seed(0)
        model = LightVAE(LightVAEConfig(width=256, latent=2))
        opt = torch.optim.Adam(model.parameters())
        loader: Any = torch.utils.data.DataLoader(cast(Any, beats), batch_size=1024, shuffle=True)  # (rows)
        total = 0.0
        for batch in loader:
            opt.zero_grad()
            loss = model.losses(batch).sum()
            loss.backward()
            total += loss.detach().item()
            opt.step()
        return total / beats.shape[0]

    add("DataLoader training epoch", "train_epoch", dataloader_epoch)
    return records
