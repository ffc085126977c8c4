"""Training on several processes: time per epoch of ``devicepipe train`` in one process and in
N DistributedDataParallel processes started by torchrun (gloo on the CPU, NCCL on GPUs).

Each configuration is a fresh command on the same recordings, from the same seed, for the same
number of epochs; the time per epoch is the median of the epochs after the first (the
``history.csv`` of the run), and the weights of every run are compared with the one-process
run's, which DDP must reproduce.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from devicepipe.anomaly import MODEL_NAME
from devicepipe.io import write_parquet
from devicepipe.simulate import simulate_ecg

__all__ = ["ddp_scaling", "timed_train"]


def timed_train(
    listing: Path, out: Path, *, nproc: int, threads: int, device: str, epochs: int, batch: int
) -> dict[str, Any]:
    """Run ``devicepipe train LISTING`` in ``nproc`` processes of ``threads`` torch threads each
    (``torchrun`` when ``nproc`` > 1) and read its epoch times and summary."""
    env = {**os.environ, "DEVICEPIPE_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    args = ["train", str(listing), "--out", str(out), "--epochs", str(epochs), "--device", device]
    args += ["--batch-size", str(batch)]
    if nproc == 1:
        command = [sys.executable, "-m", "devicepipe", *args]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
        command += ["-m", "devicepipe", *args]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    seconds = [float(line.split(",")[3]) for line in (out / "history.csv").read_text().splitlines()[1:]]
    return {
        "processes": nproc,
        "threads_per_process": threads,
        "device": device,
        "epochs": epochs,
        "batch_size": batch,
        "beats": summary["counts"]["beats"],
        "recordings": summary["recordings"]["used"],
        "epoch_seconds_median": statistics.median(seconds[1:] or seconds),
        "epoch_seconds": seconds,
        "train_stage_s": summary["seconds"]["train"],
        "wall_s": wall,
        "final_train_loss": summary["final_loss"]["train"][0],
        "distributed": summary.get("distributed"),
    }


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / MODEL_NAME, weights_only=True, map_location="cpu")["members"][0]


def ddp_scaling(
    devices: list[torch.device],
    *,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Per device: one process against N (2 gloo processes on the CPU; one per GPU on CUDA, when
    there are several), on simulated recordings; each record also gives its speed-up over one
    process and the largest weight difference from the one-process run."""
    note = progress or (lambda _m: None)
    count, minutes, epochs = (2, 1.0, 3) if quick else (8, 30.0, 6)
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        paths = []
        for i in range(count):
            sim = simulate_ecg(minutes * 60, 250.0, seed=i, ectopic_rate=0.01, noise_mV=0.03)
            paths.append(write_parquet({"ecg": sim.signal}, work / f"rec{i}.parquet", sampling_rate=250.0))
        listing = work / "records.txt"
        listing.write_text("\n".join(str(p) for p in paths) + "\n")
        for dev in devices:
            if dev.type == "cuda":
                n = torch.cuda.device_count()
                configs = [(1, 1)] + ([(n, 1)] if n > 1 else [])
            else:
                n = 2
                configs = [(1, 1), (1, n), (n, 1)]
            runs = []
            for nproc, threads in configs:
                note(f"DDP: {nproc} process(es) x {threads} thread(s) on {dev.type}")
                run = work / f"{dev.type}-p{nproc}t{threads}"
                runs.append((run, timed_train(listing, run, nproc=nproc, threads=threads, device=dev.type,
                                              epochs=epochs, batch=256)))  # fmt: skip
            base_run, base = runs[0]
            reference = _weights(base_run)
            for run, rec in runs:
                w = _weights(run)
                rec["speedup_vs_one_process"] = base["epoch_seconds_median"] / rec["epoch_seconds_median"]
                rec["max_weight_difference"] = max(float((reference[k] - w[k]).abs().max()) for k in reference)
                out.append(rec)
    return out
