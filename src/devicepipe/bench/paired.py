"""Paired, interleaved comparisons on the CPU: the notebook way, a competent CPU baseline, ours.

A machine whose speed drifts by 2x over minutes makes "all of ours, then all of theirs"
meaningless. Here every repeat runs each contender once, in an order rotated from one repeat to
the next (ABC, BCA, CAB, ...), so drift lands on every side alike. A ratio is taken within each
repeat (theirs / ours) and the median of those per-repeat ratios is reported with a bootstrap
95% interval. Every comparison runs at one thread per side and at all of the machine's threads
(torch, PyArrow and Numba are all set; NumPy's FFT and pandas' C parser use one thread
whatever is asked). Each contender's output is checked: identical rows where the algorithm is
the same, the simulator's truth where it is not, so a fast wrong answer cannot win.

Peak memory is the rise of the process's resident high-water mark during one call, after freed
memory is handed back (PyArrow's pool, ``malloc_trim``) so that no side reuses another's (Linux:
``/proc/self/clear_refs`` resets the mark; elsewhere it is not reported).

Contenders per comparison:

- ``read_csv``: pandas ``read_csv`` (the notebook's), pandas with ``engine="pyarrow"``, ours.
- ``filter``: the notebook's 30-tap kernel three ways: its 20 M-point FFT, ``np.convolve`` with
  the wrap-around added (what a CPU user writes), and our ``convolve``.
- ``peaks``: the notebook's window-180 rule three ways: its Numba kernel, SciPy's
  ``maximum_filter1d``, and our ``sliding_max`` (the step of ``ecg_peaks(method="seed")``).
- ``scale``: scikit-learn's ``MinMaxScaler`` (the notebook's), NumPy's min and max, ours.
- ``segment``: the notebook's Python loop of zero padding, one NumPy gather, ours.
- ``pipeline``: CSV to beat matrix, the notebook's way, the competent CPU way, ours with
  ``method="seed"`` (the notebook's algorithm: identical rows required) and ours with
  ``method="ricker"`` (our default: checked against the truth).

``detection_sweep`` times our detector against sleepecg's, interleaved, on the first 10 k to
20 M samples at one thread, each checked against the truth.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import numpy as np
import torch

from devicepipe.bench.baselines import seed_fftconv, seed_nms_numba, seed_pipeline, seed_taps, seed_zero_padding
from devicepipe.bench.stages import BenchInput, require
from devicepipe.core.device import usable_cores
from devicepipe.ecg import ecg_peaks, ecg_segment, evaluate_beats
from devicepipe.io import read_series
from devicepipe.signal import convolve, segment_between, sliding_max
from devicepipe.signal.scale import MinMaxScaler

__all__ = ["Contender", "detection_sweep", "paired", "run_paired", "thread_limit", "peak_rss_supported"]

_CLEAR_REFS = "/proc/self/clear_refs"


@dataclass(frozen=True)
class Contender:
    """One side of a comparison: ``role`` is ``notebook``, ``cpu baseline`` or ``ours``."""

    role: str
    label: str
    fn: Callable[[], Any]


def peak_rss_supported() -> bool:
    """Whether the resident high-water mark can be reset here (Linux with ``clear_refs``)."""
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _release_cached_memory() -> None:
    """Hand freed memory back to the system (PyArrow's pool, glibc's heap), so that a call
    cannot reuse what an earlier contender left and show no rise."""
    import gc

    import pyarrow

    gc.collect()
    pyarrow.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _peak_rise(fn: Callable[[], Any]) -> tuple[Any, int | None]:
    """Run ``fn`` once; return its result and the rise of the resident high-water mark in bytes."""
    if not peak_rss_supported():
        return fn(), None
    _release_cached_memory()
    before = _status_kb("VmRSS")
    with open(_CLEAR_REFS, "w") as f:
        f.write("5")
    result = fn()
    return result, max(0, _status_kb("VmHWM") - before) * 1024


@contextlib.contextmanager
def thread_limit(threads: int) -> Iterator[None]:
    """torch, PyArrow and (when loaded) Numba limited to ``threads`` inside the block."""
    import pyarrow

    previous_torch, previous_arrow = torch.get_num_threads(), pyarrow.cpu_count()
    numba: Any = None
    with contextlib.suppress(ImportError):
        import numba  # noqa: F811 - optional

    previous_numba = numba.get_num_threads() if numba is not None else None
    torch.set_num_threads(threads)
    pyarrow.set_cpu_count(threads)
    if numba is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        torch.set_num_threads(previous_torch)
        pyarrow.set_cpu_count(previous_arrow)
        if numba is not None and previous_numba is not None:
            numba.set_num_threads(previous_numba)


def _bootstrap_ci(ratios: list[float], *, seed: int = 0, draws: int = 2000) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the median of ``ratios``."""
    values = np.asarray(ratios, dtype=np.float64)
    if values.size < 2:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(seed)
    medians = np.median(values[rng.integers(0, values.size, (draws, values.size))], axis=1)
    return float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def paired(
    contenders: list[Contender],
    *,
    repeats: int = 7,
    warmup: int = 1,
    threads: int = 1,
    check: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Time ``contenders`` interleaved on the CPU at ``threads``; the last is "ours".

    Returns per contender the median, min and max seconds and the peak-memory rise of one
    call, and per other contender the median of the per-repeat ratios (its time / ours) with a
    bootstrap 95% interval. ``check`` receives ``{label: result}`` of the warm-up calls.
    """
    if repeats < 1 or not contenders:
        raise ValueError("paired(): needs at least one repeat and one contender.")
    with thread_limit(threads):
        results: dict[str, Any] = {}
        peaks: dict[str, int | None] = {}
        for c in contenders:
            for _ in range(max(0, warmup - 1)):
                c.fn()
            results[c.label], peaks[c.label] = _peak_rise(c.fn)
        if check is not None:
            check(results)
        results.clear()
        times: dict[str, list[float]] = {c.label: [] for c in contenders}
        k = len(contenders)
        for r in range(repeats):
            for i in range(k):
                c = contenders[(r + i) % k]
                started = time.perf_counter()
                c.fn()
                times[c.label].append(time.perf_counter() - started)
    ours = contenders[-1]
    record: dict[str, Any] = {"threads": threads, "repeats": repeats, "contenders": [], "ratios": []}
    for c in contenders:
        t = times[c.label]
        record["contenders"].append(
            {
                "role": c.role,
                "label": c.label,
                "median_s": statistics.median(t),
                "min_s": min(t),
                "max_s": max(t),
                "seconds": t,
                "peak_rss_rise_bytes": peaks[c.label],
            }
        )
    for c in contenders[:-1]:
        ratios = [a / b for a, b in zip(times[c.label], times[ours.label], strict=True)]
        low, high = _bootstrap_ci(ratios)
        record["ratios"].append(
            {
                "versus": c.label,
                "role": c.role,
                "ours": ours.label,
                "median": statistics.median(ratios),
                "ci95": [low, high],
            }
        )
    return record


def circular_convolve(signal: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """The notebook's circular convolution with a short kernel, as a CPU user writes it: one
    ``np.convolve`` (direct, O(n taps)) with the wrapped-around tail added to the start."""
    full = np.convolve(signal.astype(np.float64), taps.astype(np.float64))
    n, extra = signal.size, taps.size - 1
    out = full[:n].copy()
    out[:extra] += full[n : n + extra]
    return out


def nms_max_filter(curvature: np.ndarray, window: int = 180) -> np.ndarray:
    """The notebook's suppression rule (the maximum of ``[p, p + window)`` sits at
    ``p + (window + 1) // 2``) with SciPy's running maximum, then its run fix."""
    from scipy.ndimage import maximum_filter1d

    centre, count = (window + 1) // 2, curvature.size - window + 1
    # with origin 0, output i is the maximum of [i - window // 2, i - window // 2 + window)
    running = maximum_filter1d(curvature, size=window, mode="nearest")[window // 2 : window // 2 + count]
    gates = running == curvature[centre : centre + count]
    out = gates.astype(np.int64)
    out[1:] *= np.diff(out) == 1
    return out


def gather_rows(signal: np.ndarray, indices: np.ndarray, lower: int = 100, upper: int = 256) -> np.ndarray:
    """The notebook's zero padding with one NumPy gather instead of a Python loop."""
    lengths = np.diff(indices)
    keep = (lengths >= lower) & (lengths <= upper)
    starts, lengths = indices[:-1][keep], lengths[keep]
    cols = np.arange(upper)
    take = starts[:, None] + cols[None, :]
    rows = signal[np.minimum(take, signal.size - 1)]
    rows[cols[None, :] >= lengths[:, None]] = 0
    return rows


def ours_gates(curvature: torch.Tensor, window: int = 180) -> torch.Tensor:
    """The notebook's suppression rule with our running maximum (as in ``seed_gates``): 0/1 int64."""
    centre = (window + 1) // 2
    run_max = sliding_max(curvature, window)
    gate = curvature[centre : centre + run_max.shape[-1]] == run_max
    first = torch.ones_like(gate)
    first[1:] = ~gate[:-1]
    return (gate & first).to(torch.int64)


def _sklearn_minmax(signal: np.ndarray) -> np.ndarray:
    from sklearn.preprocessing import MinMaxScaler as SkMinMax

    return SkMinMax().fit_transform(signal.reshape(-1, 1)).reshape(-1)


def _numpy_minmax(signal: np.ndarray) -> np.ndarray:
    low, high = signal.min(), signal.max()
    return (signal - low) / (high - low)


def _ours_rows(x: torch.Tensor, indices: torch.Tensor, lower: int = 100, upper: int = 256) -> torch.Tensor:
    """The notebook's rows (consecutive gates 100-256 samples apart, zero-padded to 256) by
    our ``segment_between``."""
    lengths = indices[1:] - indices[:-1]
    keep = (lengths >= lower) & (lengths <= upper)
    matrix, _ = segment_between(x, indices[:-1][keep], lengths[keep], width=upper)
    return matrix


SETTLE_S = 2.0  # Pan-Tompkins-type detectors (sleepecg's) learn their thresholds over the first 2 s


def check_detections(found: dict[str, Any], truth: np.ndarray, fs: float, n: int) -> None:
    """Raise unless every contender's beats match the ``truth`` (sample indices) with F1 >= 0.98 on
    the first ``n`` samples, ``SETTLE_S`` from either end left out: a detector that learns its
    thresholds from the start may place the first beats of a slice off, and on a 40-second slice
    (about 45 beats) one such beat alone would bring F1 under 0.98."""
    for label, peaks in found.items():
        beats = np.asarray(peaks.numpy() if isinstance(peaks, torch.Tensor) else peaks)
        f1 = evaluate_beats(truth, beats, fs, tolerance_s=0.05, n_samples=n, edge_s=SETTLE_S).f1
        require(f1 >= 0.98, f"{label}: F1 {f1:.3f} against the truth on {n:,} samples")


def detection_sweep(
    inp: BenchInput,
    sizes: list[int] | None = None,
    *,
    repeats: int = 5,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Our detector against sleepecg's on the first ``sizes`` samples of the input, paired at one
    thread; each side's beats checked against the truth (F1 at least 0.98). Skipped with a note
    without sleepecg."""
    try:
        import sleepecg
    except ImportError as exc:
        return [{"skipped": f"sleepecg not installed ({exc}); pip install devicepipe[bench]"}]
    note = progress or (lambda _m: None)
    fs = inp.sampling_rate
    sizes = [s for s in (sizes or [10_000, 100_000, 1_000_000, 4_000_000, 20_000_000]) if s <= inp.n_samples]
    out = []
    for n in sizes:
        part = inp.signal[:n]
        as64, host = part.astype(np.float64), torch.from_numpy(part)
        truth = inp.truth[inp.truth < n]

        note(f"paired: detection on {n:,} samples")
        rec = paired(
            [
                Contender("peer", "sleepecg", partial(sleepecg.detect_heartbeats, as64, fs)),
                Contender("ours", "ecg_peaks", partial(ecg_peaks, host, fs)),
            ],
            repeats=repeats,
            threads=1,
            check=partial(check_detections, truth=truth, fs=fs, n=n),
        )
        out.append({"n_samples": n, **rec})
    return out


def _pandas_pyarrow(csv: str) -> np.ndarray:
    import pandas as pd

    return pd.read_csv(csv, engine="pyarrow", dtype="float32")["heartbeats"].to_numpy()


def _pandas_c(csv: str) -> np.ndarray:
    import pandas as pd

    return pd.read_csv(csv, dtype="float32")["heartbeats"].to_numpy()


def competent_pipeline(csv: str) -> np.ndarray:
    """The notebook's algorithm written for a CPU: pandas on PyArrow, direct convolution, a
    running maximum, a gather."""
    signal = _pandas_pyarrow(csv)
    curvature = circular_convolve(signal, seed_taps()).astype(np.float32)
    indices = np.flatnonzero(nms_max_filter(curvature, 180) == 1)
    return gather_rows(signal, indices)


def _ours_pipeline(csv: str, fs: float, method: str) -> torch.Tensor:
    s = read_series(csv, "heartbeats", device="cpu").samples
    return ecg_segment(s, cast(torch.Tensor, ecg_peaks(s, fs, method=method)), fs, mode="seed").matrix


def _identical_rows(a: np.ndarray, b: np.ndarray) -> int:
    """How many rows of ``a`` occur, equal, in ``b`` (by content)."""
    seen = {row.tobytes() for row in np.ascontiguousarray(b)}
    return sum(row.tobytes() in seen for row in np.ascontiguousarray(a))


def _check_reads(signal: np.ndarray, res: dict[str, Any]) -> None:
    for label, value in res.items():
        got = value.numpy() if isinstance(value, torch.Tensor) else value
        require(np.array_equal(got, signal), f"{label}: the values read differ from the signal")


def _check_filter(taps: np.ndarray, res: dict[str, Any]) -> None:
    nb, cpu = res["numpy FFT (notebook)"], res["np.convolve + wrap-around"]
    ours = res["ours (torch convolve)"].numpy()
    require(np.allclose(nb, cpu, atol=1e-4), "np.convolve differs from the notebook's FFT convolution")
    # ours is the causal linear convolution: equal after the kernel's wrap-around at the start
    require(np.allclose(nb[taps.size :], ours[taps.size :], atol=1e-4), "our convolve differs from the notebook's")


def _check_peaks(res: dict[str, Any]) -> None:
    nb, cpu, ours = (res[k] for k in ("numba window 180 (notebook)", "maximum_filter1d", "ours, window 180"))
    require(np.array_equal(nb, cpu), "maximum_filter1d gates differ from the notebook's kernel")
    require(np.array_equal(nb, ours.numpy()), "our window-180 suppression differs from the notebook's")


def _check_scale(res: dict[str, Any]) -> None:
    reference = res["sklearn MinMaxScaler"]
    require(np.allclose(res["numpy min/max"], reference, atol=1e-6), "numpy min/max differs from scikit-learn")
    require(np.allclose(res["ours MinMaxScaler"].numpy(), reference, atol=1e-6), "our scaling differs")


def _check_segment(res: dict[str, Any]) -> None:
    reference = res["python loop"]
    require(np.array_equal(res["numpy gather"], reference), "the NumPy gather differs from the loop")
    require(np.array_equal(res["ours segment"].numpy(), reference), "our rows differ from the loop's")


def _check_pipeline(res: dict[str, Any]) -> None:
    nb = res["notebook"]
    cpu = res["competent CPU"]
    seed = res["ours, method=seed"].numpy()
    require(nb.shape == seed.shape and np.array_equal(nb, seed), "ours (seed) rows differ from the notebook's")
    require(_identical_rows(cpu, nb) >= 0.999 * nb.shape[0], "the competent CPU way's rows differ")


Comparison = tuple[str, list[Contender], Callable[[dict[str, Any]], None]]


def _comparisons(inp: BenchInput) -> list[Comparison]:
    """Each stage's three contenders (the notebook's way, a competent CPU way, ours) and the check
    that their outputs agree."""
    signal, csv, fs = inp.signal, str(inp.csv), inp.sampling_rate
    seed_curvature = seed_fftconv(signal).astype(np.float32)
    curvature_t = torch.from_numpy(seed_curvature)
    host = torch.from_numpy(signal)
    taps = seed_taps()
    taps_t = torch.from_numpy(taps)
    n = signal.size
    seed_indices = np.flatnonzero(seed_nms_numba(seed_curvature, 180) == 1)
    indices_t = torch.from_numpy(seed_indices)

    return [
        (
            "read_csv",
            [
                Contender("notebook", "pandas.read_csv", lambda: _pandas_c(csv)),
                Contender("cpu baseline", "pandas engine=pyarrow", lambda: _pandas_pyarrow(csv)),
                Contender(
                    "ours", "devicepipe read_series", lambda: read_series(csv, "heartbeats", device="cpu").samples
                ),
            ],
            partial(_check_reads, signal),
        ),
        (
            "filter",
            [
                Contender("notebook", "numpy FFT (notebook)", lambda: seed_fftconv(signal)),
                Contender("cpu baseline", "np.convolve + wrap-around", lambda: circular_convolve(signal, taps)),
                Contender("ours", "ours (torch convolve)", lambda: convolve(host, taps_t, mode="full")[:n]),
            ],
            partial(_check_filter, taps),
        ),
        (
            "peaks",
            [
                Contender("notebook", "numba window 180 (notebook)", lambda: seed_nms_numba(seed_curvature, 180)),
                Contender("cpu baseline", "maximum_filter1d", lambda: nms_max_filter(seed_curvature, 180)),
                Contender("ours", "ours, window 180", lambda: ours_gates(curvature_t, 180)),
            ],
            _check_peaks,
        ),
        (
            "scale",
            [
                Contender("notebook", "sklearn MinMaxScaler", lambda: _sklearn_minmax(signal)),
                Contender("cpu baseline", "numpy min/max", lambda: _numpy_minmax(signal)),
                Contender("ours", "ours MinMaxScaler", lambda: MinMaxScaler().fit_transform(host)),
            ],
            _check_scale,
        ),
        (
            "segment",
            [
                Contender("notebook", "python loop", lambda: seed_zero_padding(signal, seed_indices)),
                Contender("cpu baseline", "numpy gather", lambda: gather_rows(signal, seed_indices)),
                Contender("ours", "ours segment", lambda: _ours_rows(host, indices_t)),
            ],
            _check_segment,
        ),
        (
            "pipeline",
            [
                Contender("notebook", "notebook", lambda: seed_pipeline(csv)),
                Contender("cpu baseline", "competent CPU", lambda: competent_pipeline(csv)),
                Contender("ours", "ours, method=seed", lambda: _ours_pipeline(csv, fs, "seed")),
            ],
            _check_pipeline,
        ),
    ]


def run_paired(
    inp: BenchInput,
    *,
    repeats: int = 7,
    thread_counts: list[int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Every paired comparison at each thread count (default: 1 and all usable cores)."""
    note = progress or (lambda _m: None)
    counts = thread_counts or sorted({1, usable_cores()})
    csv, fs, n = str(inp.csv), inp.sampling_rate, inp.signal.size
    found = ecg_peaks(torch.from_numpy(inp.signal), fs)
    ricker_f1 = evaluate_beats(inp.truth, found, fs, tolerance_s=0.05, n_samples=n).f1
    comparisons = _comparisons(inp)
    out = []
    for threads in counts:
        for name, contenders, check in comparisons:
            note(f"paired: {name} at {threads} thread(s)")
            out.append({"comparison": name, **paired(contenders, repeats=repeats, threads=threads, check=check)})
        note(f"paired: pipeline, ours (ricker) at {threads} thread(s)")
        ricker = paired(
            [
                Contender("notebook", "notebook", lambda: seed_pipeline(csv)),
                Contender("ours", "ours, method=ricker", lambda: _ours_pipeline(csv, fs, "ricker")),
            ],
            repeats=repeats,
            threads=threads,
            check=lambda res: require(ricker_f1 >= 0.98, "our default detector's beats do not match the truth"),
        )
        out.append({"comparison": "pipeline (ours: ricker)", **ricker})
    return out
