"""Finishing a beats run, whole or chunked: its options, the beats checked against the settings,
its files written, its result."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.artifacts import Made, write_artifacts
from devicepipe.artifacts.summaries import HolterSummary, RunSummary
from devicepipe.artifacts.write import (
    heart_rate_summary,
    input_summary,
    remove_stale,
    write_beat_files,
    write_summary,
)
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.spill import Stored
from devicepipe.ecg import (
    BeatQuality,
    Beats,
    BeatScore,
    beat_quality,
    ecg_segment,
    evaluate_beats,
)
from devicepipe.ecg.segment import SegmentMode
from devicepipe.io import (
    Recording,
    ReferenceBeats,
    staged_dir,
    write_npy,
)
from devicepipe.io.timeline import NanPolicy
from devicepipe.pipelines.checks import (
    accuracy_summary,
    median_heart_rate,
    rate_warnings,
    record_name,
    reference_in,
    time_warnings,
)
from devicepipe.pipelines.classes import Labelled, label_beats
from devicepipe.pipelines.context import BEATS_MODE, PEAK_METHOD, Run
from devicepipe.pipelines.quality import quality_summary, quality_table_columns
from devicepipe.pipelines.reading import first_lead
from devicepipe.pipelines.results import BeatsResult
from devicepipe.report import REPORT_NAME, write_report


@dataclass(frozen=True)
class BeatsOptions:
    """The settings of :func:`run_beats` other than its input and output (see there)."""

    channel: str | int | list[str] | None = None  # (a list: the leads signal_choice chose)
    sampling_rate: float | None = None
    method: str = PEAK_METHOD
    mode: SegmentMode = BEATS_MODE
    nan: NanPolicy = "error"
    encoding: str | None = None
    figures: bool = True
    strict: bool = False
    count_transfers: bool = True
    chunk: int | str | None = None  # detect in chunks of this many samples (or a duration, "10min")
    memory_budget: int | None = None  # bytes; None: a quarter of the device's free memory


def finish_beats(
    run: Run, source: Any, rec: Recording, peaks: torch.Tensor, ref: ReferenceBeats | None, opts: BeatsOptions
) -> BeatsResult:
    """Cut the beats at ``peaks`` (from the first lead of a recording of all leads), copy the
    results back and write the run directory."""
    every = rec
    rec, leads = first_lead(rec)
    fs = rec.fs
    with run.stage("segment"):
        beats = ecg_segment(rec.samples, peaks, fs, mode=opts.mode)
        quality = beat_quality(beats)
    labelled = label_beats(run, every, peaks)
    with run.stage("transfer"):
        host_peaks, kept, matrix = (t.detach().cpu().numpy() for t in (peaks, beats.kept, beats.matrix))
        signal = rec.samples.cpu().numpy() if opts.figures else None
    checked = check_beats(run, rec, rec.n_samples, peaks, host_peaks, ref, opts, labelled.classes.labels)
    with run.stage("write"), staged_dir(run.out) as stage:
        files = {"beat_matrix.npy": write_npy(matrix, stage / "beat_matrix.npy")}
        columns = quality_table_columns(quality, kept)
        files.update(
            write_beats(
                stage,
                run,
                source,
                rec,
                signal,
                kept,
                beats,
                checked,
                opts,
                columns,
                quality=quality_summary(quality, beats.peaks, rec.n_samples, fs),
                rated=(quality, beats.peaks, rec.n_samples),
                labelled=labelled,
                **leads,
            )  # fmt: skip
        )
    remove_stale(run.out, run.earlier, list(files))  # (a directory holds one run)
    found_on = tuple(leads.get("beats_found_on_leads", ()))
    result = beats_result(run, rec, rec.n_samples, host_peaks, beats, files, checked, found_on)
    return replace(result, holter=HolterSummary.from_dict(labelled.summary()))


@dataclass(frozen=True)
class _CheckedBeats:
    """What a beats run knows once its beats are found: the reference beats, the accuracy,
    heart rate and HRV, and the warnings."""

    host_peaks: np.ndarray | Stored  # (a chunked run's are held on disk)
    reference: np.ndarray | None
    score: BeatScore | None
    accuracy: dict[str, Any] | None
    heart_rate: dict[str, Any] | None
    warnings: list[str]
    median_bpm: float | None  # (see median_heart_rate)


def check_beats(
    run: Run,
    rec: Recording,
    n_samples: int,
    peaks: torch.Tensor | Stored,
    host_peaks: np.ndarray | Stored,
    ref: ReferenceBeats | None,
    opts: BeatsOptions,
    classes: np.ndarray | None = None,
) -> _CheckedBeats:
    """Score the beats against the reference, their heart rate and HRV (the spectrum between two
    N beats of ``classes``), and what they say about the settings (an error under ``strict``,
    before anything is written)."""
    fs = rec.fs
    ref_samples = None if ref is None else reference_in(ref, rec, n_samples)
    found = host_peaks if ref is None or isinstance(host_peaks, np.ndarray) else host_peaks[:]  # (as the reference)
    score = None if ref is None else evaluate_beats(ref_samples, found, fs, n_samples=n_samples)
    with run.stage("hrv"):
        heart_rate = heart_rate_summary(peaks, fs, classes)
    bpm = median_heart_rate(host_peaks, fs)
    warnings = rate_warnings(host_peaks, fs, n_samples, median_bpm=bpm)
    if opts.strict and warnings:
        raise DevicepipeError(f"{warnings[0]} (refused under strict; nothing was written).")
    warnings += time_warnings(rec)
    accuracy = None if score is None or ref is None else accuracy_summary(score, ref.source, fs, n_samples)
    return _CheckedBeats(host_peaks, ref_samples, score, accuracy, heart_rate, warnings, bpm)


def write_beats(
    stage: Path,
    run: Run,
    source: Any,
    rec: Recording,
    signal: np.ndarray | None,
    kept: np.ndarray | Stored,
    beats: Beats,
    checked: _CheckedBeats,
    opts: BeatsOptions,
    quality_columns: tuple[np.ndarray | Stored, np.ndarray | Stored] | None = None,
    rated: tuple[BeatQuality, torch.Tensor, int] | None = None,
    labelled: Labelled | None = None,
    **more: Any,
) -> dict[str, Path]:
    """Every file of a beats run but the matrix (written into ``stage`` before: listed with the
    rest), ``summary.json`` last (``quality_columns``: the
    beat table's quality columns; ``rated``: the beats' quality, their R peaks and the
    recording's length, for ``quality.png``; ``labelled``: each beat's class and the Holter
    summary, none for a run read in chunks; ``more``: the summary's extra fields). The R peaks,
    ``kept`` and the columns may be held on disk (:class:`Stored`): the files are written from
    parts of them, and only the figures read them whole."""
    fs, peaks = rec.fs, checked.host_peaks
    run.note(f"found {peaks.size:,} beats, writing {run.out}")
    files = {"beat_matrix.npy": stage / "beat_matrix.npy"}
    classes, rhythms = (labelled.columns, labelled.holter.rhythms) if labelled else (None, None)
    files.update(
        write_beat_files(
            stage, record_name(rec), peaks, kept, fs, quality=quality_columns, classes=classes, rhythms=rhythms
        )
    )
    # every R peak in memory for the figures (peaks held on disk stay there without them)
    every = peaks if isinstance(peaks, np.ndarray) else peaks[:] if signal is not None else None
    made = Made("beats", stage, rec=rec, signal=signal, peaks=every, beats=beats, reference=checked.reference,
                quality=rated, classes=classes[0] if classes else None,
                events=labelled.holter.events if labelled else None)  # fmt: skip
    files.update(write_artifacts(made))
    summary = {
        **input_summary(source, rec, run.device),
        "method": opts.method,
        "segmentation": opts.mode,
        "counts": {"beats_found": int(peaks.size), "beats_kept": int(kept.sum())},
        "beat_width": int(beats.matrix.shape[1]) if beats.matrix.ndim == 2 else 0,
        "heart_rate": checked.heart_rate,
        "seconds": run.timer.seconds,
        "accuracy": checked.accuracy,
        "transfers": run.timer.transfers(),
        "warnings": checked.warnings,
        **more,
    }
    if labelled is not None:
        summary["holter"] = labelled.summary()
    typed = RunSummary.from_dict(summary)
    files[REPORT_NAME] = write_report(stage, "beats", typed, files)
    write_summary(stage, typed, files)
    files["summary.json"] = stage / "summary.json"
    return files


def beats_result(
    run: Run,
    rec: Recording,
    n_samples: int,
    peaks: np.ndarray,
    beats: Beats,
    files: dict[str, Path],
    checked: _CheckedBeats,
    leads: tuple[str, ...] = (),
) -> BeatsResult:
    return BeatsResult(
        source=rec.source,
        device=run.device,
        sampling_rate=rec.fs,
        n_samples=n_samples,
        channel=rec.channels[0],
        peaks=peaks,
        beats=beats,
        seconds=run.timer.seconds,
        files={name: run.out / name for name in files},
        score=checked.score,
        transfers=run.timer.transfers(),
        warnings=tuple(checked.warnings),
        median_bpm=checked.median_bpm,
        reference=None if checked.accuracy is None else checked.accuracy["reference"],
        leads=leads,
    )
