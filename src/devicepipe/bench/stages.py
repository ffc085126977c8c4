"""Every stage of the ECG pipeline, timed on every device on the same input, its output checked.

The input is a simulated ECG at 250 Hz (20 M samples by default, as in the zero-copy
notebook) written once as CSV and as Parquet. Each stage's result is checked against an
independent reference (the simulator's truth, NumPy, the signal itself) and, when several
devices run, against the CPU's result, so that a fast wrong answer cannot win.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from devicepipe.bench.limits import count_flops
from devicepipe.bench.timer import measure
from devicepipe.ecg import ecg_peaks, ecg_segment, evaluate_beats
from devicepipe.io import read_series, write_csv, write_parquet
from devicepipe.learning.score import reconstruction_error
from devicepipe.learning.train import fit
from devicepipe.models import LightVAE, LightVAEConfig
from devicepipe.signal import convolve, find_peaks, ricker
from devicepipe.signal.resample import resample_rows
from devicepipe.signal.scale import MinMaxScaler
from devicepipe.simulate import simulate_ecg

__all__ = ["BenchInput", "STAGES", "beats_for_training", "prepare_input", "require", "run_stages"]

STAGES = (
    "read_csv",
    "read_parquet",
    "h2d_pageable",
    "h2d_pinned",
    "scale",
    "filter",
    "peaks",
    "detect",
    "segment",
    "train_epoch",
    "score",
    "pipeline",
)


@dataclass(frozen=True)
class BenchInput:
    """The shared input: the signal in memory and on disk, and its true R peaks."""

    signal: np.ndarray  # float32 (n,)
    truth: np.ndarray  # int64 R-peak samples
    sampling_rate: float
    csv: Path
    parquet: Path

    @property
    def n_samples(self) -> int:
        return int(self.signal.size)


def prepare_input(n_samples: int, workdir: str | Path, *, sampling_rate: float = 250.0, seed: int = 0) -> BenchInput:
    """Simulate ``n_samples`` of ECG and write it as ``ecg.csv`` (one column, as the notebook's) and ``ecg.parquet``."""

    workdir = Path(workdir)
    sim = simulate_ecg(n_samples / sampling_rate, sampling_rate, seed=seed, ectopic_rate=0.005, noise_mV=0.03)
    signal = sim.signal.numpy()
    write_csv({"heartbeats": signal}, workdir / "ecg.csv")
    write_parquet({"heartbeats": signal}, workdir / "ecg.parquet", sampling_rate=sampling_rate)
    return BenchInput(signal, sim.r_peaks.numpy(), sampling_rate, workdir / "ecg.csv", workdir / "ecg.parquet")


def _f1(truth: np.ndarray, peaks: torch.Tensor, fs: float, n: int) -> float:

    return evaluate_beats(truth, peaks.cpu(), fs, tolerance_s=0.05, n_samples=n).f1


def require(ok: bool, what: str) -> None:
    """Fail a benchmark whose result is wrong (a fast wrong answer must not win)."""
    if not ok:
        raise AssertionError(what)


def beats_for_training(inp: BenchInput, device: torch.device, width: int = 256) -> torch.Tensor:
    """The input's beats (seed segmentation) resampled to ``width`` and standardised: ``(n_beats, width)``."""

    x = torch.from_numpy(inp.signal).to(device)
    beats = ecg_segment(x, cast(torch.Tensor, ecg_peaks(x, inp.sampling_rate)), inp.sampling_rate, mode="seed")
    m = resample_rows(beats.matrix, width)
    return (m - m.mean()) / m.std()


Case = tuple[Callable[[], Any], Callable[[Any], None], Callable[[Any], Any]]


@dataclass(frozen=True)
class _Cases:
    """The stages' work on one device: name -> (work, check against an independent reference,
    what to compare across devices); and the model and beats the learning stages share."""

    cases: dict[str, Case]
    trained: torch.nn.Module | None
    beats: Any
    new_model: Callable[[], torch.nn.Module]


def _cases(inp: BenchInput, dev: torch.device, kernel: torch.Tensor, wanted: set[str]) -> _Cases:
    """What each stage does on ``dev``, and how its result is checked."""
    fs, n = inp.sampling_rate, inp.n_samples
    head = min(n, 200_000)
    conv_reference = np.convolve(inp.signal[:head].astype(np.float64), kernel.double().numpy(), mode="same")
    host = torch.from_numpy(inp.signal)
    x = host.to(dev)
    pinned = host.pin_memory() if dev.type == "cuda" else None
    filtered = convolve(x, kernel)
    feature = filtered.abs()
    peaks = cast(torch.Tensor, ecg_peaks(x, fs))  # (one lead's)
    beats = beats_for_training(inp, dev) if {"train_epoch", "score"} & wanted else None

    def new_model() -> torch.nn.Module:
        torch.manual_seed(0)
        return LightVAE(LightVAEConfig(width=256, latent=2)).to(dev)

    trained = new_model() if beats is not None else None
    cases: dict[str, tuple[Callable[[], Any], Callable[[Any], None], Callable[[Any], Any]]] = {
        # name: (work, check against an independent reference, what to compare across devices)
        "read_csv": (
            lambda: read_series(inp.csv, "heartbeats", device=dev).samples,
            lambda r: require(torch.equal(r.cpu(), host), "CSV read differs from the signal"),
            lambda r: r.cpu(),
        ),
        "read_parquet": (
            lambda: read_series(inp.parquet, device=dev).samples,
            lambda r: require(torch.equal(r.cpu(), host), "Parquet read differs from the signal"),
            lambda r: r.cpu(),
        ),
        "scale": (
            lambda: MinMaxScaler().fit_transform(x),
            lambda r: _check_scaled(r, inp.signal, head),
            lambda r: r.cpu(),
        ),
        "filter": (
            lambda: convolve(x, kernel),
            lambda r: _check_filtered(r, conv_reference, kernel.numel()),
            lambda r: r.cpu(),
        ),
        "peaks": (
            lambda: find_peaks(feature, min_distance=int(0.2 * fs)),
            lambda r: require(r.numel() > 0.9 * inp.truth.size, "too few local maxima"),
            lambda r: r.cpu(),
        ),
        "detect": (
            lambda: ecg_peaks(x, fs),
            lambda r: require(_f1(inp.truth, r, fs, n) >= 0.99, "detector F1 below 0.99 against truth"),
            lambda r: r.cpu(),
        ),
        "segment": (
            lambda: ecg_segment(x, peaks, fs, mode="seed"),
            lambda r: _check_rows(r, host),
            lambda r: r.matrix.cpu(),
        ),
        "pipeline": (
            lambda: ecg_segment(
                (s := read_series(inp.csv, "heartbeats", device=dev).samples),
                cast(torch.Tensor, ecg_peaks(s, fs)),
                fs,
                mode="seed",
            ),
            lambda r: require(_f1(inp.truth, r.peaks, fs, n) >= 0.98, "pipeline beats do not match truth"),
            lambda r: r.matrix.cpu(),
        ),
    }
    if beats is not None and trained is not None:
        cases["train_epoch"] = (
            lambda: fit(new_model(), beats, epochs=1, batch_size=1024, val_fraction=0.0, seed=0).train[-1],
            lambda r: require(math.isfinite(r), "training loss is not finite"),
            lambda r: r,
        )
        cases["score"] = (
            lambda: reconstruction_error(trained, beats),
            lambda r: require(bool(torch.isfinite(r).all()), "scores are not finite"),
            lambda r: r.cpu(),
        )
    if dev.type == "cuda" and pinned is not None:
        cases["h2d_pageable"] = (lambda: host.to(dev), lambda r: None, lambda r: r.cpu())
        cases["h2d_pinned"] = (lambda: pinned.to(dev, non_blocking=True), lambda r: None, lambda r: r.cpu())
    return _Cases(cases, trained, beats, new_model)


def _check_scaled(r: torch.Tensor, signal: np.ndarray, head: int) -> None:
    expected = (signal[:head] - signal.min()) / (signal.max() - signal.min())
    require(np.allclose(r[:head].cpu().numpy(), expected, atol=1e-6), "scaling differs from (x - min) / (max - min)")


def _check_filtered(r: torch.Tensor, reference: np.ndarray, taps: int) -> None:
    """The reference saw only its first samples: compare away from its cut end."""
    head = reference.shape[0] - taps
    require(np.allclose(r[:head].cpu().numpy(), reference[:head], atol=1e-4), "filter differs from numpy.convolve")


def _check_rows(r: Any, host: torch.Tensor) -> None:
    """Every fiftieth beat row equals the signal it was cut from."""
    step = max(1, r.matrix.shape[0] // 50)
    same = all(
        torch.equal(r.matrix[i, : int(r.lengths[i])].cpu(), host[int(r.starts[i]) : int(r.starts[i] + r.lengths[i])])
        for i in range(0, r.matrix.shape[0], step)
    )
    require(same, "beat rows differ from the signal")


def _matches(a: Any, b: Any) -> bool:
    """Whether a stage's result on another device matches the CPU's (floats within 1e-4)."""
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and (
            torch.equal(a, b) if not a.dtype.is_floating_point else torch.allclose(a, b, rtol=1e-4, atol=1e-4)
        )
    return math.isclose(a, b, rel_tol=1e-3)


def run_stages(
    inp: BenchInput,
    devices: list[torch.device],
    *,
    repeats: int = 3,
    only: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Time every stage (or ``only`` those) on every device; return one record per (stage, device)."""

    note = progress or (lambda _m: None)
    n = inp.n_samples
    width = 0.015 * inp.sampling_rate
    kernel = ricker(2 * math.ceil(4 * width) + 1, width)
    records: list[dict[str, Any]] = []
    cpu_results: dict[str, Any] = {}
    wanted = set(only or STAGES)
    for dev in devices:
        staged = _cases(inp, dev, kernel, wanted)
        for name in STAGES:
            if name not in wanted or name not in staged.cases:
                continue
            work, check, comparable = staged.cases[name]
            note(f"{name} on {dev}")
            timing = measure(work, device=dev, repeats=repeats, check=check)
            result = work()
            record = {
                "stage": name,
                "device": str(dev),
                "n_samples": n,
                **timing.to_dict(),
                "samples_per_s": n / timing.median_s,
                "checked": True,
                "matches_cpu": None,
            }
            if dev.type == "cpu":
                cpu_results[name] = comparable(result)
            elif name in cpu_results:
                record["matches_cpu"] = bool(_matches(cpu_results[name], comparable(result)))
            record.update(_work(name, result, inp, kernel.numel(), staged.trained, staged.beats, staged.new_model))
            records.append(record)
    return records


def _work(
    name: str,
    result: Any,
    inp: BenchInput,
    taps: int,
    trained: torch.nn.Module | None,
    beats: torch.Tensor | None,
    new_model: Callable[[], torch.nn.Module],
) -> dict[str, int]:
    """The least work a stage must do, for its achieved rate: ``bytes`` read and written
    (float32 samples, 4 bytes each), ``flops`` executed, ``text_bytes`` of CSV parsed."""
    n4 = 4 * inp.n_samples
    if name in ("read_csv", "pipeline"):
        return {"text_bytes": inp.csv.stat().st_size}
    if name == "read_parquet":
        return {"bytes": inp.parquet.stat().st_size + n4}  # the file read, the samples written
    if name in ("h2d_pageable", "h2d_pinned", "peaks", "detect"):
        return {"bytes": n4}  # the signal read (or copied) once
    if name == "scale":
        return {"bytes": 3 * n4}  # fit reads it; transform reads it and writes the result
    if name == "filter":
        return {"bytes": 2 * n4, "flops": 2 * taps * inp.n_samples}  # direct form: a multiply-add per tap
    if name == "segment":
        return {"bytes": 2 * result.matrix.numel() * result.matrix.element_size()}  # rows read and written
    if beats is None:
        return {}
    sample = beats[:1024]
    scale = beats.shape[0] / sample.shape[0]
    if name == "train_epoch":
        one = count_flops(lambda: fit(new_model(), sample, epochs=1, batch_size=1024, val_fraction=0.0, seed=0))
        return {"flops": int(one * scale)}
    if name == "score" and trained is not None:
        return {"flops": int(count_flops(lambda: reconstruction_error(trained, sample)) * scale)}
    return {}
