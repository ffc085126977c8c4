"""Run the benchmarks: every section asked for, on every device, with the machine they ran on."""

from __future__ import annotations

import datetime
import importlib
import os
import platform
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from devicepipe.bench.baselines import run_baselines
from devicepipe.bench.ddp import ddp_scaling
from devicepipe.bench.interop import handoff_comparison
from devicepipe.bench.limits import annotate, measure_limits
from devicepipe.bench.micro import crossover, run_micro
from devicepipe.bench.paired import detection_sweep, run_paired
from devicepipe.bench.results import source_commit
from devicepipe.bench.stages import STAGES, prepare_input, run_stages
from devicepipe.bench.timer import measure
from devicepipe.core.device import device_report, resolve_device
from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import evaluate_beats

if TYPE_CHECKING:
    pass
from devicepipe.bench.tables import ratios

SECTIONS = ("stages", "baselines", "paired", "micro", "crossover", "peers", "handoff", "ddp")


def _versions() -> dict[str, str | None]:
    out = {}
    for name in ("torch", "numpy", "pyarrow", "pandas", "sklearn", "numba", "neurokit2", "sleepecg", "wfdb"):
        try:
            out[name] = getattr(importlib.import_module(name), "__version__", None)
        except Exception:
            out[name] = None
    return out


def _peers(inp: Any, repeats: int, note: Callable[[str], None]) -> list[dict[str, Any]]:

    records: list[dict[str, Any]] = []
    for name in ("neurokit2", "sleepecg"):
        note(f"peer: {name}")
        try:
            if name == "neurokit2":
                import neurokit2 as nk

                def run() -> np.ndarray:
                    cleaned = nk.ecg_clean(inp.signal, sampling_rate=inp.sampling_rate)
                    return np.asarray(nk.ecg_peaks(cleaned, sampling_rate=inp.sampling_rate)[1]["ECG_R_Peaks"])
            else:
                import sleepecg

                def run() -> np.ndarray:
                    return np.asarray(sleepecg.detect_heartbeats(inp.signal.astype(np.float64), inp.sampling_rate))
        except ImportError as exc:
            records.append({"peer": name, "skipped": f"not installed ({exc}); pip install devicepipe[bench]"})
            continue
        t = measure(run, device="cpu", repeats=1)
        f1 = evaluate_beats(inp.truth, run(), inp.sampling_rate, tolerance_s=0.05, n_samples=inp.n_samples).f1
        records.append(
            {
                "peer": name,
                "n_samples": inp.n_samples,
                **t.to_dict(),
                "samples_per_s": inp.n_samples / t.median_s,
                "f1_vs_truth": f1,
            }
        )
    return records


def bench_devices(names: list[str] | None = None) -> list[torch.device]:
    """The devices to benchmark: each of ``names`` (an unavailable one is an error), or by
    default the CPU and, where there is one, the current CUDA device."""
    if not names:
        names = ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
    return [resolve_device(name) for name in names]


def check_only(only: list[str]) -> list[str]:
    """``only`` as given, or an error naming the first entry that is neither a section nor a stage."""
    unknown = [w for w in only if w not in SECTIONS and w not in STAGES]
    if unknown:
        raise DevicepipeError(f"unknown benchmark {unknown[0]!r}; choose from {list(SECTIONS) + list(STAGES)}.")
    return only


def run_benchmarks(
    devices: list[torch.device],
    *,
    quick: bool = False,
    only: list[str] | None = None,
    n_samples: int | None = None,
    repeats: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Everything ``devicepipe bench`` measures, as one JSON-serialisable dict."""

    note = progress or (lambda _m: None)
    n = n_samples or (200_000 if quick else 20_000_000)
    reps = repeats or (1 if quick else 5)
    stage_names = [s for s in (check_only(only) if only else STAGES) if s in STAGES]
    sections = (
        set(SECTIONS) if not only else {s for s in only if s in SECTIONS} | ({"stages"} if stage_names else set())
    )
    result: dict[str, Any] = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": source_commit(),  # the code measured (None outside a git checkout)
        "machine": device_report(),
        "platform": platform.platform(),
        "threads": torch.get_num_threads(),
        # whether PyTorch backs large CPU buffers with huge pages (the CLI asks for it)
        "huge_pages": os.environ.get("THP_MEM_ALLOC_ENABLE", "").upper() in ("1", "ON", "YES", "TRUE", "Y"),
        "versions": _versions(),
        "devices": [str(d) for d in devices],
        "quick": quick,
        "n_samples": n,
        "repeats": reps,
    }
    with tempfile.TemporaryDirectory() as tmp:
        if sections & {"stages", "baselines", "peers", "paired"}:  # the sections that use the simulated ECG
            note(f"simulating {n:,} samples and writing them as CSV and Parquet")
            inp = prepare_input(n, tmp)
        if "stages" in sections:
            result["stages"] = run_stages(inp, devices, repeats=reps, only=stage_names, progress=note)
            note("this machine's limits: memory copy, matrix product, CSV parsing")
            result["limits"] = measure_limits(devices, inp.csv, quick=quick, repeats=reps)
            annotate(result["stages"], result["limits"])
        if "baselines" in sections:
            result["baselines"] = run_baselines(inp, repeats=reps, progress=note)
        if "peers" in sections:
            result["peers"] = _peers(inp, reps, note)
        if "paired" in sections:
            counts = [1] if quick else None  # quick: one thread only (it checks that everything runs)
            result["paired"] = run_paired(inp, repeats=reps, thread_counts=counts, progress=note)
            result["detection_sweep"] = detection_sweep(inp, repeats=reps, progress=note)
    if "handoff" in sections:
        note("host round trip vs zero-copy handoff")
        result["handoff"] = handoff_comparison(n, repeats=reps)
    if "micro" in sections:
        result["micro"] = run_micro(devices, quick=quick, repeats=3 if quick else 5, progress=note)
    if "crossover" in sections:
        result["crossover"] = crossover(devices, quick=quick, repeats=reps, progress=note)
    if "ddp" in sections:
        result["ddp"] = ddp_scaling(devices, quick=quick, progress=note)
    result["ratios"] = ratios(result)
    return result
