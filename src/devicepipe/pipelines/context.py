"""What every pipeline shares: its defaults, the run in progress (out, device, stage timer,
progress callback), and copying results back to the host."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from devicepipe.artifacts.write import earlier_files
from devicepipe.core.device import resolve_device
from devicepipe.core.interop import TransferLedger
from devicepipe.core.timing import StageTimer
from devicepipe.ecg.segment import SegmentMode
from devicepipe.io import (
    check_output_dir,
    sweep_leftovers,
)

Progress = Callable[[str], None]
EpochProgress = Callable[[int, float, float], None]

MIN_BEATS_TO_TRAIN = 20
MIN_WINDOWS_TO_TRAIN = 10

# Defaults of the pipelines (the command line takes its defaults from these too)
PEAK_METHOD = "ricker"  # the accurate detector; "seed" is the notebook's recipe
BEATS_MODE: SegmentMode = "seed"  # run_beats: the notebook's peak-to-peak beats
ECG_MODE: SegmentMode = "centered"  # run_ecg: windows around each R peak, which keep premature beats
BEAT_WIDTH = 256  # samples per beat row given to the VAE (a power of two)
SERIES_WINDOW = "1d"  # run_series: days
SERIES_HIDDEN = 32  # hidden units of the MLP autoencoder (the notebook's)


@dataclass(frozen=True)
class Run:
    """One run in progress: where it writes, the device, its stage timer, its progress callback."""

    out: Path
    device: torch.device
    timer: StageTimer
    note: Progress
    earlier: tuple[str, ...] = ()  # the files of the run this one replaces (see outputs.remove_stale)

    def stage(self, name: str, *, count: bool = True) -> Any:
        return self.timer.stage(name, count=count)


def start(out: str | Path, device: str | torch.device, count_transfers: bool, progress: Progress | None) -> Run:
    out = check_output_dir(out)
    dev = resolve_device(device)
    note = progress or (lambda _msg: None)
    removed = sweep_leftovers(out)  # of an earlier run into the same directory that was killed
    if removed:
        note(f"removed {len(removed)} file(s) an interrupted run left in {out}")
    ledger = TransferLedger() if count_transfers else None
    return Run(out, dev, StageTimer(dev, ledger), note, earlier_files(out))


#: Beats read from disk at a time in a chunked run's later stages.
BEAT_PART = 1 << 16
