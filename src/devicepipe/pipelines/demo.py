"""``run_demo``: a simulated 30-minute ECG through the whole ECG pipeline."""

from __future__ import annotations

from pathlib import Path

import torch

from devicepipe.io import (
    check_output_dir,
)
from devicepipe.learning.learn import (
    LearnSettings,
)
from devicepipe.pipelines.context import EpochProgress, Progress
from devicepipe.pipelines.ecg import run_ecg
from devicepipe.pipelines.results import DemoResult
from devicepipe.simulate import simulate_ecg, write_simulated_ecg


def run_demo(
    out: str | Path = "demo-run",
    *,
    device: str | torch.device = "auto",
    epochs: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    epoch_progress: EpochProgress | None = None,
) -> DemoResult:
    """Simulate a 30-minute ECG at 250 Hz with about 1 % ventricular ectopic beats, run :func:`run_ecg`
    on it in ``out`` (the recording in ``out/input/``), and count the ectopic beats it flagged."""
    note = progress or (lambda _msg: None)
    out = check_output_dir(out)
    settings = LearnSettings(epochs=epochs, threads=threads)
    note("simulating a 30-minute ECG at 250 Hz with a few ectopic beats")
    sim = simulate_ecg(1800.0, 250.0, heart_rate_bpm=72.0, noise_mV=0.03, wander_mV=0.2, ectopic_rate=0.01, seed=0)
    path, truth = write_simulated_ecg(sim, out / "input" / "ecg.parquet")
    ectopic = sim.r_peaks.cpu().numpy()[sim.symbols == "V"]
    note(f"simulated {path} ({sim.r_peaks.numel():,} beats, {ectopic.size} ventricular ectopic; truth in {truth})")
    result = run_ecg(
        path, out, settings=settings, device=device, reference=truth, progress=note, epoch_progress=epoch_progress
    )
    found = result.summary["reference"]["labels"].get("V", {}).get("flagged", 0)
    return DemoResult(result, path, truth, int(sim.r_peaks.numel()), int(ectopic.size), found)
