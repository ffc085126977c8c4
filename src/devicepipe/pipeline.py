"""Pipelines: the stages in order, timed, with their outputs written atomically.

The CLI calls these; they never print. Progress is reported through an optional callback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.device import resolve_device, synchronize
from devicepipe.ecg import Beats, BeatScore, ecg_peaks, ecg_segment, evaluate_beats
from devicepipe.errors import DevicepipeError
from devicepipe.interop import TransferLedger, count_transfers
from devicepipe.io import read_beat_annotations, read_series, staged_dir, write_json, write_npy, write_parquet

__all__ = ["BeatsResult", "StageTimer", "run_beats"]

Progress = Callable[[str], None]


@dataclass
class StageTimer:
    """Wall-clock seconds per stage, with the device synchronised at each boundary."""

    device: torch.device
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        synchronize(self.device)
        started = time.perf_counter()
        yield
        synchronize(self.device)
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


@dataclass(frozen=True)
class BeatsResult:
    """What :func:`run_beats` found and wrote."""

    source: str
    device: torch.device
    sampling_rate: float
    n_samples: int
    channel: str
    peaks: np.ndarray  # int64 sample indices, shape (n_beats,)
    beats: Beats
    seconds: dict[str, float]
    files: dict[str, Path]
    score: BeatScore | None = None
    transfers: TransferLedger | None = None

    @property
    def mean_heart_rate_bpm(self) -> float | None:
        if self.peaks.size < 2:
            return None
        return 60.0 * self.sampling_rate / float(np.median(np.diff(self.peaks)))


def run_beats(
    source: Any,
    out: str | Path,
    *,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    method: str = "ricker",
    mode: str = "seed",
    device: str | torch.device = "auto",
    reference: str | Path | None = None,
    figures: bool = True,
    progress: Progress | None = None,
) -> BeatsResult:
    """Read an ECG, find its beats, cut them into a matrix and write everything to ``out``.

    Writes ``beats.parquet`` (peak sample, time in seconds, RR interval in seconds, whether
    segmentation kept it), ``beat_matrix.npy`` (``(n_kept, width)`` float32), ``summary.json``
    and, with ``figures``, ``excerpt.png`` and ``intervals.png``. All or nothing: files appear
    in ``out`` only once every one of them is complete.
    """
    with count_transfers() as ledger:
        return _run_beats(
            source,
            out,
            channel,
            sampling_rate,
            method,
            mode,
            resolve_device(device),
            reference,
            figures,
            progress or (lambda _msg: None),
            ledger,
        )


def _run_beats(
    source: Any,
    out: str | Path,
    channel: str | int | None,
    sampling_rate: float | None,
    method: str,
    mode: str,
    dev: torch.device,
    reference: str | Path | None,
    figures: bool,
    note: Progress,
    ledger: TransferLedger,
) -> BeatsResult:
    timer = StageTimer(dev)
    with timer.stage("read"):
        rec = read_series(source, channel if channel is not None else 0, device=dev, sampling_rate=sampling_rate)
    if rec.sampling_rate is None:
        raise DevicepipeError(
            f"the sampling rate of {rec.source} is unknown; pass --sampling-rate HZ (e.g. --sampling-rate 250)."
        )
    fs = rec.sampling_rate
    note(f"read {rec.n_samples:,} samples at {fs:g} Hz onto {dev}")
    with timer.stage("detect"):
        peaks = ecg_peaks(rec.samples, fs, method=method)
    with timer.stage("segment"):
        beats = ecg_segment(rec.samples, peaks, fs, mode=mode)
    ref = None
    if reference is not None:
        ref = read_beat_annotations(reference)
    with timer.stage("transfer"):
        peaks_host = peaks.cpu().numpy()
        kept_host = beats.kept.cpu().numpy()
        matrix_host = beats.matrix.cpu().numpy()
        signal_host = rec.samples.cpu().numpy() if figures else None
    score = None
    if ref is not None:
        score = evaluate_beats(ref.samples, peaks_host, fs, n_samples=rec.n_samples)
    note(f"found {peaks_host.size:,} beats, writing {out}")
    rr = np.diff(peaks_host, prepend=np.nan) / fs if peaks_host.size else np.zeros(0)
    files: dict[str, Path] = {}
    with timer.stage("write"), staged_dir(out) as stage:
        write_parquet(
            {"peak": peaks_host, "time_s": peaks_host / fs, "rr_s": rr, "kept": kept_host},
            stage / "beats.parquet",
            sampling_rate=fs,
        )
        write_npy(matrix_host, stage / "beat_matrix.npy")
        if figures and signal_host is not None:
            from devicepipe.plot import plot_beats_excerpt, plot_intervals, save_figure  # noqa: PLC0415

            save_figure(
                plot_beats_excerpt(
                    signal_host,
                    fs,
                    peaks_host,
                    reference=None if ref is None else ref.samples,
                    unit=rec.units[0],
                    title=f"{rec.source} ({rec.channels[0]}): detected beats",
                ),
                stage / "excerpt.png",
            )
            lengths = np.diff(peaks_host)
            keep = (int(round(0.4 * fs)), int(round(1.024 * fs))) if mode == "seed" else None
            save_figure(plot_intervals(rr[1:], lengths, keep_range=keep), stage / "intervals.png")
        summary = {
            "input": str(source) if isinstance(source, (str, Path)) else type(source).__name__,
            "channel": rec.channels[0],
            "device": str(dev),
            "sampling_rate_hz": fs,
            "n_samples": rec.n_samples,
            "method": method,
            "segmentation": mode,
            "n_beats": int(peaks_host.size),
            "n_kept": int(kept_host.sum()),
            "beat_width": int(matrix_host.shape[1]) if matrix_host.ndim == 2 else 0,
            "seconds": timer.seconds,
            "accuracy": None if score is None else score.to_dict(),
            "transfers": ledger.to_dict(),
        }
        write_json(summary, stage / "summary.json")
        names = ["beats.parquet", "beat_matrix.npy", "summary.json"] + (
            ["excerpt.png", "intervals.png"] if figures else []
        )
    files = {name: Path(out) / name for name in names}
    return BeatsResult(
        source=rec.source,
        device=dev,
        sampling_rate=fs,
        n_samples=rec.n_samples,
        channel=rec.channels[0],
        peaks=peaks_host,
        beats=beats,
        seconds=timer.seconds,
        files=files,
        score=score,
    )
