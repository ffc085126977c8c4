"""Pipelines: the stages of one recording in order, on one device, timed, their outputs written.

Each ``run_*`` reads like the data flow: read -> segment -> (scale -> learn -> score) ->
copy back -> write. The stages live in their own modules (:mod:`~devicepipe.io`,
:mod:`~devicepipe.ecg`, :mod:`~devicepipe.windows`, :mod:`~devicepipe.scale`,
:mod:`~devicepipe.learn`, :mod:`~devicepipe.score`, :mod:`~devicepipe.outputs`). These
functions never print; progress goes to optional callbacks. ``"auto"`` devices are resolved
here, once.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from devicepipe.anomaly import MODEL_NAME, BeatAnomalyDetector, load_model
from devicepipe.device import free_memory, release_freed_memory, resolve_device
from devicepipe.ecg import (
    AAMI_CLASSES,
    EDGE_S,
    MATCH_TOLERANCE_S,
    POOR_QUALITY,
    QUALITY_WINDOW_S,
    BeatQuality,
    Beats,
    BeatScore,
    aami_class,
    beat_correlation,
    beat_quality,
    check_ecg,
    detection_chunk,
    ecg_peaks,
    ecg_peaks_chunked_to,
    ecg_segment,
    ecg_segment_chunked,
    evaluate_beats,
    label_beats,
    poor_stretches,
    poor_stretches_stored,
    segment_kept_parts,
    stretch_quality_stored,
    template_rows,
    typical_beat,
)
from devicepipe.errors import DevicepipeError
from devicepipe.interop import TransferLedger
from devicepipe.io import (
    Recording,
    ReferenceBeats,
    TimeReport,
    check_output_dir,
    read_reference,
    read_series,
    staged_dir,
    sweep_leftovers,
    write_npy,
    write_parquet,
)
from devicepipe.io.channels import choose_signal, time_column_of
from devicepipe.io.chunks import chunk_reader, npy_rows, recording_length, samples_at_most
from devicepipe.io.discover import INDEX_NAME, find_recordings
from devicepipe.io.read import check_rate, declares_sampling_rate, header_sampling_rate, input_fingerprint
from devicepipe.io.spill import Spill, Stored
from devicepipe.learn import (
    DEFAULT_SCORER,
    LearnSettings,
    SeriesLearnSettings,
    check_before_start,
    convergence_warning,
)
from devicepipe.models import LightVAEConfig
from devicepipe.outputs import (
    beats_figures,
    ecg_figures,
    heart_rate_summary,
    input_summary,
    quality_figure,
    score_figures,
    series_figures,
    series_score_figures,
    train_figures,
    write_beat_files,
    write_score_table,
    write_scores,
    write_summary,
)
from devicepipe.prestart import is_dataset
from devicepipe.report import MAX_FLAGGED_ROWS, REPORT_NAME, FlaggedRows, write_report
from devicepipe.scale import StandardScaler
from devicepipe.score import Scores, group_scores, latent_grid, reconstruct
from devicepipe.signal.blocks import lower_median_of_parts, median_of_parts
from devicepipe.signal.resample import resample_rows
from devicepipe.simulate import simulate_ecg, write_simulated_ecg
from devicepipe.threads import ThreadChoice
from devicepipe.timing import StageTimer
from devicepipe.train import distributed, distributed_summary
from devicepipe.units import format_duration, parse_duration
from devicepipe.windows import Windows, make_windows

__all__ = [
    "BeatsOptions",
    "BeatsResult",
    "DemoResult",
    "LearnResult",
    "LearnSettings",
    "SeriesLearnSettings",
    "StageTimer",
    "check_settings",
    "rate_warnings",
    "run_beats",
    "run_beats_many",
    "run_demo",
    "run_ecg",
    "MODEL_INPUTS",
    "model_input",
    "run_score",
    "run_score_series",
    "run_series",
    "run_train",
]

Progress = Callable[[str], None]
EpochProgress = Callable[[int, float, float], None]

MIN_BEATS_TO_TRAIN = 20
MIN_WINDOWS_TO_TRAIN = 10

# Defaults of the pipelines (the command line takes its defaults from these too)
PEAK_METHOD = "ricker"  # the accurate detector; "seed" is the notebook's recipe
BEATS_MODE = "seed"  # run_beats: the notebook's peak-to-peak beats
ECG_MODE = "centered"  # run_ecg: windows around each R peak, which keep premature beats
BEAT_WIDTH = 256  # samples per beat row given to the VAE (a power of two)
SERIES_WINDOW = "1d"  # run_series: days
SERIES_HIDDEN = 32  # hidden units of the MLP autoencoder (the notebook's)


@dataclass(frozen=True)
class BeatsResult:
    """What :func:`run_beats` found and wrote."""

    source: str
    device: torch.device
    sampling_rate: float
    n_samples: int
    channel: str
    peaks: np.ndarray  # int64 sample indices, shape (n_beats,) (of a chunked run: mapped from a temporary file)
    beats: Beats
    seconds: dict[str, float]
    files: dict[str, Path]
    score: BeatScore | None = None
    transfers: dict[str, Any] | None = None  # host-device copies counted (None when not counted)
    warnings: tuple[str, ...] = ()  # what looks wrong with the settings (see rate_warnings)
    median_bpm: float | None = None  # found with the beats (else from the peaks when asked)

    @property
    def mean_heart_rate_bpm(self) -> float | None:
        """The median heart rate (:func:`median_heart_rate`), in beats per minute."""
        return median_heart_rate(self.peaks, self.sampling_rate) if self.median_bpm is None else self.median_bpm


@dataclass(frozen=True)
class LearnResult:
    """What a learning pipeline wrote: the run directory, its summary, its files."""

    out: Path
    summary: dict[str, Any]
    files: dict[str, Path]


@dataclass(frozen=True)
class _Run:
    """One run in progress: where it writes, the device, its stage timer, its progress callback."""

    out: Path
    device: torch.device
    timer: StageTimer
    note: Progress

    def stage(self, name: str, *, count: bool = True) -> Any:
        return self.timer.stage(name, count=count)


def _start(out: str | Path, device: str | torch.device, count_transfers: bool, progress: Progress | None) -> _Run:
    out = check_output_dir(out)
    dev = resolve_device(device)
    note = progress or (lambda _msg: None)
    removed = sweep_leftovers(out)  # of an earlier run into the same directory that was killed
    if removed:
        note(f"removed {len(removed)} file(s) an interrupted run left in {out}")
    ledger = TransferLedger() if count_transfers else None
    return _Run(out, dev, StageTimer(dev, ledger), note)


def _to_host(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Host (NumPy) copies of named tensors (inside a run's "transfer" stage)."""
    return {name: t.detach().cpu().numpy() for name, t in tensors.items()}


def _unknown_rate(source: str) -> DevicepipeError:
    problem = f"the sampling rate of {source} is unknown"
    return DevicepipeError(
        f"{problem}; pass sampling_rate=HZ (e.g. sampling_rate=250).",
        cli=f"{problem}; pass --sampling-rate HZ (e.g. --sampling-rate 250).",
    )


def _read_ecg(
    run: _Run,
    source: Any,
    channel: str | int | None,
    sampling_rate: float | None,
    nan: str,
    encoding: str | None,
    time_column: str | None = None,
) -> Recording:
    """Read one ECG channel onto the run's device: the one named, else :func:`_signal_choice`'s;
    ``nan`` (the policy for non-finite samples) and ``encoding`` (a CSV's) as
    :func:`devicepipe.io.read_series` takes them. With no rate given or stated by the file, the
    rate is that of ``time_column``'s timestamps (a table's, as :func:`_signal_choice` finds it)."""
    if channel is None:
        channel, time_column = _signal_choice(run, source, None)
    times = sampling_rate is None and declares_sampling_rate(source) is False
    if times and time_column is None:
        raise _unknown_rate(Path(source).name)  # said before a long read, not after
    with run.stage("read"):
        rec = read_series(
            source,
            None if channel == ALL_LEADS else channel,
            device=run.device,
            sampling_rate=sampling_rate,
            time_column=time_column if times else None,
            nan=nan,
            encoding=encoding,
        )
    if rec.sampling_rate is None:
        raise _unknown_rate(rec.source)
    return rec


def _no_beats(rec: Recording, peaks: torch.Tensor) -> DevicepipeError:
    """The error of a recording from which no whole beat was cut (a model needs beats)."""
    problem = f"no whole beat was cut from {rec.source} ({int(peaks.numel())} R peaks found)"
    return DevicepipeError(
        f"{problem}; is it an ECG, and is the sampling rate right?",
        cli=f"{problem}; is it an ECG, and is --sampling-rate right?",
    )


def _signal_choice(run: _Run, source: Any, channel: str | int | None) -> tuple[str | int, str | None]:
    """The channel to read (``channel`` where named, else :func:`~devicepipe.io.channels.choose_signal`'s,
    saying which channels were passed over) and a table's column of timestamps before it (or None)."""
    if channel is not None:
        return channel, None
    choice = choose_signal(source)
    if choice.passed:
        names = ", ".join(repr(name) for name in choice.passed)
        run.note(f"reading {choice.channel!r}, past {names} (an axis, or not named as an ECG); --channel picks another")
    return choice.channel, choice.time_column


#: ``channel`` value that finds one set of beats from every lead (``ecg_peaks(..., leads="fuse")``).
ALL_LEADS = "all"


def _find_peaks(rec: Recording, method: str, channel: str | int | None) -> torch.Tensor:
    """The R peaks of a recording: of its one channel, or, for ``channel="all"``, of all its leads together."""
    if channel == ALL_LEADS:
        leads = rec.samples if rec.samples.ndim == 2 else rec.samples[None]
        return ecg_peaks(leads, rec.sampling_rate, method=method, leads="fuse")
    return ecg_peaks(rec.samples, rec.sampling_rate, method=method)


def _first_lead(rec: Recording) -> tuple[Recording, dict[str, Any]]:
    """A recording of all leads reduced to its first (beats are cut from it), and the summary
    fields that say the beats were found on every lead; a one-channel recording as it is."""
    if rec.samples.ndim == 1:
        return rec, {}
    first = replace(rec, samples=rec.samples[0], channels=rec.channels[:1], units=rec.units[:1])
    return first, {"beats_found_on_leads": list(rec.channels)}


def _read_and_cut(
    run: _Run,
    source: Any,
    channel: str | int | None,
    sampling_rate: float | None,
    method: str,
    mode: str,
    nan: str,
    encoding: str | None,
) -> tuple[Recording, torch.Tensor, Beats]:
    """Read one ECG channel onto the run's device (:func:`_read_ecg`), find its beats (on all
    leads with ``channel="all"``, then cut from the first), cut them."""
    rec = _read_ecg(run, source, channel, sampling_rate, nan, encoding)
    run.note(f"finding beats in {rec.n_samples:,} samples at {rec.sampling_rate:g} Hz on {run.device}")
    with run.stage("detect"):
        peaks = _find_peaks(rec, method, channel)
    rec, leads = _first_lead(rec)
    if leads:
        run.note(f"beats found on all {len(leads['beats_found_on_leads'])} leads together, cut from {rec.channels[0]}")
    with run.stage("segment"):
        beats = ecg_segment(rec.samples, peaks, rec.sampling_rate, mode=mode)
    return rec, peaks, beats


@dataclass(frozen=True)
class BeatsOptions:
    """The settings of :func:`run_beats` other than its input and output (see there)."""

    channel: str | int | None = None
    sampling_rate: float | None = None
    method: str = PEAK_METHOD
    mode: str = BEATS_MODE
    nan: str = "error"
    encoding: str | None = None
    figures: bool = True
    strict: bool = False
    count_transfers: bool = True
    chunk: int | str | None = None  # detect in chunks of this many samples (or a duration, "10min")
    memory_budget: int | None = None  # bytes; None: a quarter of the device's free memory


def run_beats(
    source: Any,
    out: str | Path,
    *,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    method: str = PEAK_METHOD,
    mode: str = BEATS_MODE,
    device: str | torch.device = "auto",
    reference: str | Path | None = None,
    nan: str = "error",
    encoding: str | None = None,
    figures: bool = True,
    strict: bool = False,
    progress: Progress | None = None,
    count_transfers: bool = True,
    chunk: int | str | None = None,
    memory_budget: int | None = None,
) -> BeatsResult:
    """Read an ECG, find its beats, cut them into a matrix and write everything to ``out``.

    Writes ``report.html``, ``beats.parquet`` and ``beats.csv`` (peak sample, time in seconds,
    RR interval in seconds, whether segmentation kept it), ``RECORD.qrs`` (WFDB annotations),
    ``beat_matrix.npy`` (``(n_kept, width)`` float32), ``summary.json`` and, with ``figures``,
    ``excerpt.png``, ``heart_rate.png`` and ``intervals.png``. All or nothing: files appear in
    ``out`` only once every one of them is complete. ``count_transfers`` counts host-device
    copies in every stage (``summary.json``'s ``transfers``). ``nan`` is the policy for
    non-finite samples. What looks like a wrong setting (:func:`rate_warnings`) is in the
    result's and the summary's ``warnings``; with ``strict`` it is an error, before anything is
    written.

    A recording too long for memory is read and detected in chunks of ``chunk`` samples (or a
    duration such as ``"10min"``): the same peaks and beat matrix as in one piece (see
    :func:`~devicepipe.ecg.ecg_peaks_chunked`), with memory flat in the recording's length.
    Chunking also starts by itself for a file whose detection would need more than
    ``memory_budget`` bytes (default: a quarter of the device's free memory).
    """
    run = _start(out, device, count_transfers, progress)
    ref = None if reference is None else read_reference(reference)  # checked before the recording is read
    channel, time_column = _signal_choice(run, source, channel)  # (the chunk size may need its rate)
    opts = BeatsOptions(
        channel, sampling_rate, method, mode, nan, encoding, figures, strict, count_transfers, chunk, memory_budget
    )
    size = _chunk_size(source, opts, run.device)
    if size is not None:
        if channel == ALL_LEADS:
            raise DevicepipeError(
                "--channel all finds beats on every lead in one piece, and this recording is read in chunks "
                "(--chunk, or beyond --memory-budget); pick one channel (--channel 0) or raise --memory-budget."
            )
        return _run_beats_chunked(run, source, ref, opts, size)
    rec = _read_ecg(run, source, channel, sampling_rate, nan, encoding, time_column)
    run.note(f"finding beats in {rec.n_samples:,} samples at {rec.sampling_rate:g} Hz on {run.device}")
    with run.stage("detect"):
        peaks = _find_peaks(rec, method, channel)
    return _finish_beats(run, source, rec, peaks, ref, opts)


def run_beats_many(
    sources: Sequence[Any],
    outs: Sequence[str | Path],
    *,
    options: BeatsOptions | None = None,
    references: Sequence[str | Path | None] | None = None,
    device: str | torch.device = "auto",
) -> list[BeatsResult | DevicepipeError]:
    """:func:`run_beats` on many recordings, ``sources[i]`` written to ``outs[i]``, with the beats of
    equal-length recordings at one rate found in one batched :func:`~devicepipe.ecg.ecg_peaks` call
    (a ``(batch, time)`` pass costs about what one recording does, so ten thousand 10-s ECGs are
    not ten thousand small calls). The peaks are those of one call per recording (the detector
    treats each row on its own).

    Returns, per recording, its result, or the :class:`DevicepipeError` that stopped it (a bad
    recording does not stop the others; nothing is written for it). Errors that are not a user's
    mistake (a bug, running out of memory) are raised.
    """
    opts = options or BeatsOptions()
    refs = list(references) if references is not None else [None] * len(sources)
    if not len(sources) == len(outs) == len(refs):
        raise DevicepipeError("run_beats_many(): sources, outs and references must have the same length.")
    dev = resolve_device(device)
    results: list[BeatsResult | DevicepipeError | None] = [None] * len(sources)
    ready: dict[int, tuple[_Run, Recording, ReferenceBeats | None]] = {}
    for i, (source, out) in enumerate(zip(sources, outs, strict=True)):
        try:
            run = _start(out, dev, opts.count_transfers, None)
            ref = None if refs[i] is None else read_reference(refs[i])
            rec = _read_ecg(run, source, opts.channel, opts.sampling_rate, opts.nan, opts.encoding)
            _check_ecg_input(rec, opts.channel)
            ready[i] = (run, rec, ref)
        except DevicepipeError as exc:
            results[i] = exc
    groups: dict[tuple[int, float, torch.dtype], list[int]] = {}
    for i, (_, rec, _) in ready.items():
        groups.setdefault((tuple(rec.samples.shape), rec.sampling_rate, rec.samples.dtype), []).append(i)
    fuse = opts.channel == ALL_LEADS
    for (_, fs, _), members in groups.items():
        runs = [ready[i][0] for i in members]
        stacked = torch.stack([ready[i][1].samples for i in members]) if len(members) > 1 else None
        started = runs[0].timer.seconds.get("detect", 0.0)
        with runs[0].stage("detect"):
            if stacked is None:
                found = [_find_peaks(ready[members[0]][1], opts.method, opts.channel)]
            elif fuse:
                leads = stacked if stacked.ndim == 3 else stacked[:, None]
                found = ecg_peaks(leads, fs, method=opts.method, leads="fuse")
            else:
                found = ecg_peaks(stacked, fs, method=opts.method)
        share = (runs[0].timer.seconds["detect"] - started) / len(members)  # each its share of the call
        for i, run, peaks in zip(members, runs, found, strict=True):
            run.timer.seconds["detect"] = share
            _, rec, ref = ready[i]
            try:
                results[i] = _finish_beats(run, sources[i], rec, peaks, ref, opts)
            except DevicepipeError as exc:
                results[i] = exc
    return [r if r is not None else DevicepipeError("not run") for r in results]


#: Bytes of memory per sample that detecting and cutting beats in one piece needs (float32;
#: measured about 10: 2.1 GB peak for 151 M samples, benchmarks/results/datasets_long.json,
#: "memory"): the signal, the filter response, the beat matrix and the host copies.
BYTES_PER_SAMPLE = 12
#: Samples per chunk when chunking starts by itself (2.3 h at 250 Hz, about 100 MB of working
#: memory): per-chunk costs vanish at this size, so chunks detect as fast as one piece
#: (benchmarks/results/datasets_long.json, "memory").
AUTO_CHUNK_SAMPLES = 2**21


def check_settings(options: Mapping[str, Any]) -> None:
    """Check the settings of a run that do not depend on its recording (``sampling_rate``; for
    beats, ``chunk`` with its ``method``), as the run itself checks them. For a batch of
    recordings they are checked once, before any is read: a wrong one would fail every
    recording alike, or go unused where short recordings are detected in one batched call."""
    check_rate(options.get("sampling_rate"))
    if options.get("chunk") is not None:
        _check_chunk(options["chunk"], options.get("method", PEAK_METHOD))


def _check_chunk(chunk: int | str, method: str) -> None:
    if method != "ricker":
        raise DevicepipeError(
            f"detection in chunks is made for method='ricker', not {method!r}.",
            cli=f"--chunk is made for --method ricker, not {method}.",
        )
    if isinstance(chunk, str):
        parse_duration(chunk)  # (a clear error for a duration that is not one)
    elif chunk < 1:
        raise DevicepipeError(f"chunk must be a positive number of samples, got {chunk}.")


def _chunk_size(source: Any, opts: BeatsOptions, device: torch.device) -> int | None:
    """Samples per chunk for this recording, or None to detect it in one piece."""
    if opts.chunk is None and not isinstance(source, (str, Path)):
        return None
    if opts.chunk is not None:
        if not isinstance(source, (str, Path)):
            raise DevicepipeError("chunk= needs a recording file (chunks are read from it), not an in-memory array.")
        _check_chunk(opts.chunk, opts.method)
        if isinstance(opts.chunk, str):
            rate = opts.sampling_rate or header_sampling_rate(Path(source), opts.channel)
            if rate is None:
                raise _unknown_rate(Path(source).name)
            return max(1, int(round(parse_duration(opts.chunk) * rate)))
        return int(opts.chunk)
    if opts.method != "ricker" or opts.nan != "error":
        return None
    budget = opts.memory_budget if opts.memory_budget is not None else free_memory(device) // 4
    try:
        if samples_at_most(source, opts.channel) * BYTES_PER_SAMPLE <= budget:
            return None  # it fits (a CSV plainly small enough is not counted first)
        n = recording_length(source, opts.channel)
    except DevicepipeError:
        return None  # read in one piece, which says what is wrong with it
    return AUTO_CHUNK_SAMPLES if n * BYTES_PER_SAMPLE > budget else None


def _run_beats_chunked(
    run: _Run, source: Any, ref: ReferenceBeats | None, opts: BeatsOptions, size: int
) -> BeatsResult:
    """:func:`run_beats` with the recording read, detected and cut ``size`` samples at a time
    (memory flat in its length); the beat matrix goes straight to its file."""
    if opts.nan != "error":
        raise DevicepipeError(
            f"nan={opts.nan!r} needs the whole recording in memory; detect it in one piece (no chunk=).",
            cli=f"--nan {opts.nan} needs the whole recording in memory; drop --chunk (and --memory-budget).",
        )
    channel = opts.channel  # (chosen by run_beats where none was named)
    read, n, fs = chunk_reader(
        source, channel, sampling_rate=opts.sampling_rate, device=run.device, encoding=opts.encoding
    )
    # no stage in chunks smaller than detection's smallest (a few seconds): a --chunk of 1ms had
    # segmentation cut a 1-hour recording one sample at a time
    size = max(size, detection_chunk(1, fs))
    run.note(f"finding beats in {n:,} samples at {fs:g} Hz on {run.device}, {size:,} samples at a time")
    read = run.timer.counted(read)  # chunks cross to the device in read() alone: count there, not every operator
    with Spill() as held:  # what grows with the recording (peaks, kept beats, quality) waits on disk
        peaks, kept = Stored(held, "peaks"), Stored(held, "kept")
        with run.stage("detect", count=False):
            ecg_peaks_chunked_to(
                held, read, n, fs, chunk=size,
                progress=lambda done, total: run.note(f"finding beats: {100 * done / total:.0f} %"),
            )  # fmt: skip
        release_freed_memory()  # the chunks' blocks, freed, would hold the resident size up
        with run.stage("read"):  # ten seconds for the excerpt (and the channel's name and unit)
            first = _excerpt_start(peaks, n, fs)
            rec = read_series(
                source, channel, device=run.device, sampling_rate=fs,
                start=first, stop=min(n, first + int(round(10 * fs))), encoding=opts.encoding,
            )  # fmt: skip
        checked = _check_beats(run, rec, n, peaks, peaks, ref, opts)
        release_freed_memory()
        held.append("kept", torch.zeros(0, dtype=torch.bool))  # (a bool mask, even of no beats)
        for part in segment_kept_parts(peaks, n, fs, part=BEAT_PART, mode=opts.mode):
            held.append("kept", part)
        with run.stage("write"), staged_dir(run.out) as stage:
            with run.stage("segment", count=False):  # each chunk's rows appended to the file as they are cut
                cut = _write_matrix_chunked(stage / "beat_matrix.npy", read, n, peaks, int(kept.sum()), fs, size, opts)
            files = {"beat_matrix.npy": stage / "beat_matrix.npy"}
            with run.stage("segment", count=False):  # quality from the rows on disk, a chunk of rows at a time
                _quality_stored(held, stage / "beat_matrix.npy", fs)
            release_freed_memory()
            signal = rec.samples.cpu().numpy() if opts.figures else None
            chunking = {"samples_per_chunk": size, "chunks": -(-n // size), "seconds_per_chunk": size / fs}
            rated = (*_stored_quality(held), n) if opts.figures else None  # (a figure of every beat: in memory)
            columns = (Stored(held, "quality_column"), Stored(held, "stretch_column"))
            summary = {"quality": _quality_summary_stored(held, n, fs), "n_samples": n, "chunked": chunking}
            files.update(_write_beats(stage, run, source, rec, signal, kept, cut, checked, opts, columns, rated=rated,
                                      **summary))  # fmt: skip
        # what the caller is given (9 bytes a beat), mapped from disk: in memory only where it is used
        host_peaks, host_kept = held.mapped("peaks"), held.mapped("kept")
        checked = replace(checked, host_peaks=host_peaks)
    beats = Beats(
        torch.from_numpy(np.load(run.out / "beat_matrix.npy", mmap_mode="c")),  # on disk, not in memory
        cut.lengths.new_empty(0), torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64),
        torch.from_numpy(host_kept), fs, cut.mode, cut.before, cut.length_range,
    )  # fmt: skip
    return _beats_result(run, rec, n, host_peaks, beats, files, checked)


#: Beats read from disk at a time in a chunked run's later stages.
BEAT_PART = 1 << 16


def _write_matrix_chunked(
    path: Path,
    read: Callable[[int, int], torch.Tensor],
    n: int,
    peaks: Stored,
    n_kept: int,
    fs: float,
    size: int,
    opts: BeatsOptions,
) -> Beats:
    """The beat matrix written to ``path`` (an NPY file of ``(n_kept, width)`` float32) as chunks
    of the recording are cut; returns the first chunk's :class:`Beats` (its geometry)."""
    cut = None
    with path.open("wb") as fh:
        for _, part in ecg_segment_chunked(read, n, peaks, fs, chunk=size, mode=opts.mode):
            rows = part.matrix.cpu().numpy().astype(np.float32, copy=False)
            if cut is None:
                header = {"descr": "<f4", "fortran_order": False, "shape": (n_kept, rows.shape[1])}
                np.lib.format.write_array_header_1_0(fh, header)
                cut = part
            fh.write(np.ascontiguousarray(rows))  # (its buffer: no copy)
    return cut


def _quality_stored(held: Spill, matrix_file: Path, fs: float, rows: int = 4096) -> None:
    """:func:`~devicepipe.ecg.beat_quality` of the beat matrix in ``matrix_file``, ``rows`` rows at
    a time, into ``held``: each cut beat's ``quality`` and ``stretch`` (the R peaks of the cut
    beats are gathered first, ``kept_peaks``), and the beat table's columns of them over every R
    peak, NaN where none was cut (``quality_column``, ``stretch_column``)."""
    peaks, kept = Stored(held, "peaks"), Stored(held, "kept")
    held.append("kept_peaks", torch.zeros(0, dtype=torch.int64))
    for s in range(0, len(peaks), BEAT_PART):
        held.append("kept_peaks", torch.from_numpy(peaks[s : s + BEAT_PART][kept[s : s + BEAT_PART]]))
    n, width, read = npy_rows(matrix_file)
    template = typical_beat(read([(i, i + 1) for i in template_rows(n).tolist()])) if n else torch.zeros(width)
    held.append("quality", torch.zeros(0))
    for i in range(0, n, rows):
        held.append("quality", beat_correlation(read([(i, min(n, i + rows))]), template))
    held.append("stretch", torch.zeros(0))
    stretch_quality_stored(Stored(held, "quality"), Stored(held, "kept_peaks"), fs, held, name="stretch")
    done = 0
    for s in range(0, len(peaks), BEAT_PART):
        mask = kept[s : s + BEAT_PART]
        count = int(np.count_nonzero(mask))
        for name in ("quality", "stretch"):
            column = np.full(mask.size, np.nan, np.float32)
            column[mask] = held.read(name, done, done + count).numpy()
            held.append(f"{name}_column", torch.from_numpy(column))
        done += count


def _stored_quality(held: Spill) -> tuple[BeatQuality, torch.Tensor]:
    """The cut beats' quality and R peaks held in ``held`` (by :func:`_quality_stored`), in memory."""
    return BeatQuality(held.read("quality"), held.read("stretch"), QUALITY_WINDOW_S), held.read("kept_peaks")


def _excerpt_start(peaks: np.ndarray | Stored, n_samples: int, fs: float) -> int:
    """Where the excerpt figure starts: half a second before the first beat after the first 5 %
    (``peaks`` sorted, in memory or on disk)."""
    i = peaks.searchsorted(0.05 * n_samples)
    first = int(peaks[i]) if i < len(peaks) else 0
    return max(0, min(n_samples - int(round(10 * fs)), first - int(0.5 * fs)))


def _check_ecg_input(rec: Recording, channel: str | int | None = None) -> None:
    """The checks :func:`ecg_peaks` makes, made on one recording before it joins a batch (so one
    bad recording is refused alone, not with its batch); with ``channel="all"``, on each lead."""
    if rec.samples.ndim != 1 and channel != ALL_LEADS:
        raise DevicepipeError(f"{rec.source}: expected one channel, got shape {tuple(rec.samples.shape)}.")
    check_ecg(rec.samples, rec.sampling_rate)


def _quality_columns(quality: BeatQuality, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``beats.parquet``'s quality columns: every R peak's beat and stretch quality, NaN where not kept."""
    beat, stretch = np.full(kept.size, np.nan, np.float32), np.full(kept.size, np.nan, np.float32)
    beat[kept], stretch[kept] = quality.beat.cpu().numpy(), quality.stretch.cpu().numpy()
    return beat, stretch


def _check_min_quality(min_quality: float | None) -> None:
    if min_quality is not None and not -1.0 <= min_quality <= 1.0:
        raise DevicepipeError(
            f"min_quality must be a correlation between -1 and 1, got {min_quality}.",
            cli=f"--min-quality must be a correlation between -1 and 1 (say 0.5), got {min_quality}.",
        )


#: The unusable stretches ``summary.json`` lists at most (all are in ``quality.png``'s shading).
LISTED_STRETCHES = 1000


def _quality_summary(
    quality: BeatQuality, kept_peaks: torch.Tensor, n_samples: int, fs: float, min_quality: float | None = None
) -> dict[str, Any]:
    """``summary.json``'s signal quality: how many cut beats (alone, or by their stretch) are poor,
    and the unusable stretches of the recording (``kept_peaks``: the R peaks of the rated beats)."""
    mark = POOR_QUALITY if min_quality is None else min_quality
    rated = int(quality.beat.numel())
    poor = poor_stretches(quality, kept_peaks, n_samples, fs, mark).cpu().numpy()
    poor_beats = int((~quality.usable(mark)).sum()) if rated else 0
    median = float(quality.beat.median()) if rated else None
    return _quality_fields(quality.window_s, mark, rated, poor_beats, median, poor, n_samples, fs)


def _quality_summary_stored(held: Spill, n_samples: int, fs: float) -> dict[str, Any]:
    """:func:`_quality_summary` of the quality held on disk by :func:`_quality_stored`."""
    rated = held.size("quality")
    poor_beats = 0
    for s in range(0, rated, BEAT_PART):
        part = (held.read(name, s, s + BEAT_PART) for name in ("quality", "stretch"))
        poor_beats += int(torch.count_nonzero(~BeatQuality(*part, QUALITY_WINDOW_S).usable(POOR_QUALITY)))
    median = float(lower_median_of_parts(lambda: held.parts("quality", BEAT_PART))) if rated else None
    poor = poor_stretches_stored(Stored(held, "stretch"), Stored(held, "kept_peaks"), n_samples, fs).numpy()
    return _quality_fields(QUALITY_WINDOW_S, POOR_QUALITY, rated, poor_beats, median, poor, n_samples, fs)


def _quality_fields(
    window_s: float,
    mark: float,
    rated: int,
    poor_beats: int,
    median: float | None,
    poor: np.ndarray,
    n_samples: int,
    fs: float,
) -> dict[str, Any]:
    return {
        "measure": "correlation with the recording's typical beat; stretch: its median over the stretch",
        "window_s": window_s,
        "poor_below": mark,
        "beats_rated": rated,
        "beats_poor": poor_beats,
        "median": median,
        "unusable_s": float((poor[:, 1] - poor[:, 0]).sum() / fs),
        "unusable_share": float((poor[:, 1] - poor[:, 0]).sum() / max(1, n_samples)),
        "unusable_stretches_s": [[round(a / fs, 3), round(b / fs, 3)] for a, b in poor[:LISTED_STRETCHES].tolist()],
    }


def _finish_beats(
    run: _Run, source: Any, rec: Recording, peaks: torch.Tensor, ref: ReferenceBeats | None, opts: BeatsOptions
) -> BeatsResult:
    """Cut the beats at ``peaks`` (from the first lead of a recording of all leads), copy the
    results back and write the run directory."""
    rec, leads = _first_lead(rec)
    fs = rec.sampling_rate
    with run.stage("segment"):
        beats = ecg_segment(rec.samples, peaks, fs, mode=opts.mode)
        quality = beat_quality(beats)
    with run.stage("transfer"):
        host = _to_host({"peaks": peaks, "kept": beats.kept, "matrix": beats.matrix})
        signal = rec.samples.cpu().numpy() if opts.figures else None
    checked = _check_beats(run, rec, rec.n_samples, peaks, host["peaks"], ref, opts)
    with run.stage("write"), staged_dir(run.out) as stage:
        files = {"beat_matrix.npy": write_npy(host["matrix"], stage / "beat_matrix.npy")}
        columns = _quality_columns(quality, host["kept"])
        files.update(
            _write_beats(
                stage,
                run,
                source,
                rec,
                signal,
                host["kept"],
                beats,
                checked,
                opts,
                columns,
                quality=_quality_summary(quality, beats.peaks, rec.n_samples, fs),
                rated=(quality, beats.peaks, rec.n_samples),
                **leads,
            )  # fmt: skip
        )
    return _beats_result(run, rec, rec.n_samples, host["peaks"], beats, files, checked)


@dataclass(frozen=True)
class _CheckedBeats:
    """What a beats run knows once its beats are found: the reference beats, the accuracy,
    heart rate and HRV, and the warnings."""

    host_peaks: np.ndarray
    reference: np.ndarray | None
    score: BeatScore | None
    accuracy: dict[str, Any] | None
    heart_rate: dict[str, Any] | None
    warnings: list[str]
    median_bpm: float | None  # (see median_heart_rate)


def _check_beats(
    run: _Run,
    rec: Recording,
    n_samples: int,
    peaks: torch.Tensor,
    host_peaks: np.ndarray,
    ref: ReferenceBeats | None,
    opts: BeatsOptions,
) -> _CheckedBeats:
    """Score the beats against the reference, their heart rate and HRV, and what they say about
    the settings (an error under ``strict``, before anything is written)."""
    fs = rec.sampling_rate
    ref_samples = None if ref is None else _reference_in(ref, rec, n_samples)
    found = host_peaks if ref is None or isinstance(host_peaks, np.ndarray) else host_peaks[:]  # (as the reference)
    score = None if ref is None else evaluate_beats(ref_samples, found, fs, n_samples=n_samples)
    with run.stage("hrv"):
        heart_rate = heart_rate_summary(peaks, fs)
    bpm = median_heart_rate(host_peaks, fs)
    warnings = rate_warnings(host_peaks, fs, n_samples, median_bpm=bpm)
    if opts.strict and warnings:
        raise DevicepipeError(f"{warnings[0]} (refused under strict; nothing was written).")
    accuracy = None if score is None else _accuracy(score, ref.source, fs, n_samples)
    return _CheckedBeats(host_peaks, ref_samples, score, accuracy, heart_rate, warnings, bpm)


def _write_beats(
    stage: Path,
    run: _Run,
    source: Any,
    rec: Recording,
    signal: np.ndarray | None,
    kept: np.ndarray | Stored,
    beats: Beats,
    checked: _CheckedBeats,
    opts: BeatsOptions,
    quality_columns: tuple[np.ndarray | Stored, np.ndarray | Stored] | None = None,
    rated: tuple[BeatQuality, torch.Tensor, int] | None = None,
    **more: Any,
) -> dict[str, Path]:
    """Every file of a beats run but the matrix, ``summary.json`` last (``quality_columns``: the
    beat table's quality columns; ``rated``: the beats' quality, their R peaks and the
    recording's length, for ``quality.png``; ``more``: the summary's extra fields). The R peaks,
    ``kept`` and the columns may be held on disk (:class:`Stored`): the files are written from
    parts of them, and only the figures read them whole."""
    fs, peaks = rec.sampling_rate, checked.host_peaks
    run.note(f"found {peaks.size:,} beats, writing {run.out}")
    files = write_beat_files(stage, _record_name(rec), peaks, kept, fs, quality=quality_columns)
    if signal is not None:
        every = peaks if isinstance(peaks, np.ndarray) else peaks[:]  # (a figure of every beat)
        files.update(beats_figures(stage, rec, signal, every, beats, checked.reference))
        if rated is not None:
            files["quality.png"] = quality_figure(stage, rated[0], rated[1], rated[2], fs)
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
    files[REPORT_NAME] = write_report(stage, "beats", summary, files)
    files["summary.json"] = write_summary(stage, summary, files)
    return files


def _beats_result(
    run: _Run,
    rec: Recording,
    n_samples: int,
    peaks: np.ndarray,
    beats: Beats,
    files: dict[str, Path],
    checked: _CheckedBeats,
) -> BeatsResult:
    return BeatsResult(
        source=rec.source,
        device=run.device,
        sampling_rate=rec.sampling_rate,
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
    )


#: Heart rates a human ECG can show, in beats per minute; a median outside says the rate is wrong.
PLAUSIBLE_BPM = (20.0, 300.0)


def median_heart_rate(peaks: np.ndarray | Stored, sampling_rate: float) -> float | None:
    """60 / the median RR interval, in beats per minute; None with fewer than two beats.
    ``peaks``: sorted, in memory or held on disk (read a part at a time)."""
    if len(peaks) < 2:
        return None
    if isinstance(peaks, np.ndarray):
        return 60.0 * sampling_rate / float(np.median(np.diff(peaks)))

    def intervals() -> Iterator[torch.Tensor]:
        for s in range(0, len(peaks) - 1, BEAT_PART):
            yield torch.from_numpy(np.diff(peaks[s : s + BEAT_PART + 1]).astype(np.float64))

    return 60.0 * sampling_rate / median_of_parts(intervals)


def rate_warnings(
    peaks: np.ndarray | Stored, sampling_rate: float, n_samples: int, *, median_bpm: float | None = None
) -> list[str]:
    """What the beats found say about the settings: no beat in over a minute of recording, or a
    median heart rate outside :data:`PLAUSIBLE_BPM`, both most often a wrong sampling rate (or
    not an ECG). ``peaks`` are sample indices, shape ``(n_beats,)``."""
    minutes = n_samples / sampling_rate / 60.0
    if peaks.size < 2:
        if minutes > 1.0:
            return [
                f"{peaks.size} beat(s) found in {minutes:.1f} minutes of recording: is it an ECG, and is the "
                f"sampling rate of {sampling_rate:g} Hz right?"
            ]
        return []
    bpm = median_heart_rate(peaks, sampling_rate) if median_bpm is None else median_bpm
    lo, hi = PLAUSIBLE_BPM
    if lo <= bpm <= hi:
        return []
    return [
        f"the median heart rate is {bpm:.0f} bpm, outside {lo:.0f}-{hi:.0f} bpm: the sampling rate of "
        f"{sampling_rate:g} Hz is most likely wrong (or the recording is not an ECG)"
    ]


def _record_name(rec: Recording) -> str:
    """The record name of the run's WFDB annotation file: the input's name without its suffix,
    in the letters, digits, ``-`` and ``_`` that WFDB record names allow."""
    name = Path(rec.source).name if rec.source else ""
    stem = Path(name).stem if Path(name).suffix else name
    return re.sub(r"[^-\w]", "_", stem, flags=re.ASCII) or "recording"


def _reference_in(ref: ReferenceBeats, rec: Recording, n_samples: int | None = None) -> np.ndarray:
    """The reference beats as sample indices of ``rec`` (of ``n_samples``, when ``rec`` holds only
    a part); a clear error when they do not fit in it."""
    samples = ref.samples_at(rec.sampling_rate)
    n = rec.n_samples if n_samples is None else n_samples
    if samples.size and int(samples[-1]) >= n:
        raise DevicepipeError(
            f"reference {ref.source} has beats past the end of {rec.source} (the last at sample "
            f"{int(samples[-1]):,}; the recording has {n:,}): is it this recording's reference, "
            "and is the sampling rate right?"
        )
    return samples


def _accuracy(score: BeatScore, source: str, fs: float, n_samples: int) -> dict[str, Any]:
    """``summary.json``'s accuracy: the counts inside the scoring window, and that window."""
    return {
        "reference": source,
        "scoring_window_s": [EDGE_S, n_samples / fs - EDGE_S],
        "tolerance_s": MATCH_TOLERANCE_S,
        "reference_beats_in_window": score.tp + score.fn,
        "beats_found_in_window": score.tp + score.fp,
        **score.to_dict(),
    }


# ----------------------------------------------------------------------------- learning pipelines


@dataclass(frozen=True)
class _Learned:
    """The fitted detector, its histories, every row's scores, and the threads it used."""

    detector: BeatAnomalyDetector
    scores: Scores
    epoch_limit: int
    warning: str | None  # set when a model was still learning when training ended

    @property
    def models(self) -> list[torch.nn.Module]:
        return self.detector.models_

    @property
    def histories(self) -> list[dict[str, Any]]:
        return self.detector.histories_

    @property
    def threads(self) -> ThreadChoice:
        return self.detector.threads_


def _detector(
    settings: LearnSettings, device: torch.device, *, scorer: str = DEFAULT_SCORER, **model: Any
) -> BeatAnomalyDetector:
    """The estimator a learning pipeline trains, from its settings (``scorer``: the pipeline's
    default when they name none); ``model`` its model's choices."""
    return BeatAnomalyDetector(
        scorer=settings.scorer or scorer,
        neighbours="auto" if settings.neighbours is None else settings.neighbours,
        contamination=(100.0 - settings.percentile) / 100.0,
        device=str(device),
        epochs=settings.epochs,
        max_epochs=settings.max_epochs,
        patience=settings.patience,
        min_improvement=settings.min_improvement,
        batch_size=settings.batch_size,
        lr=settings.lr,
        weight_decay=settings.weight_decay,
        val_fraction=settings.val_fraction,
        seed=settings.seed,
        latent=settings.latent,
        ensemble=settings.ensemble,
        bf16=settings.bf16,
        threads=settings.threads,
        **model,
    )


def _learn(
    run: _Run,
    detector: BeatAnomalyDetector,
    rows: torch.Tensor,
    settings: LearnSettings,
    extra_state: dict[str, Any],
    epoch_progress: EpochProgress | None,
    what: str,
    *,
    stream: bool = False,
) -> _Learned:
    """The shared middle of the learning pipelines: fit ``detector`` on ``rows`` in ``run.out``
    (its checkpoint there), score every row."""
    run.out.mkdir(parents=True, exist_ok=True)
    (run.out / "summary.json").unlink(missing_ok=True)  # the directory is incomplete until the end

    def started(threads: ThreadChoice) -> None:
        run.note(f"training on {what} ({threads.threads} thread{'s' if threads.threads > 1 else ''})")

    with run.stage("train"):
        detector.fit(
            rows,
            checkpoint_dir=run.out,
            resume=settings.resume,
            callback=epoch_progress,
            tensorboard=settings.tensorboard,
            extra_state=extra_state,
            on_start=started,
            stream=stream,
        )
    warning = convergence_warning(detector.histories_)
    return _Learned(detector, detector.details_, settings.epoch_limit, warning)


#: What a beat model's geometry says about scaling: each recording's beats by their own mean and deviation.
RECORDING_SCALING = "each recording's beats standardised by their own mean and standard deviation"


def _beat_geometry(beats: Beats, method: str, width: int) -> dict[str, Any]:
    """What rows a beat model takes, for its model file: how beats are found, cut, resampled and scaled.

    Beats are cut in seconds and resampled to ``width`` samples, so a model takes recordings
    of any sampling rate; the rate it was trained at is kept for the record."""
    return {
        "input": "ecg-beats",
        "method": method,
        "mode": beats.mode,
        "window_s": beats.window_s,
        "width": width,
        "scaling": RECORDING_SCALING,
        "trained_at_hz": beats.sampling_rate,
    }


def _identity(source: Any, settings: LearnSettings, **choices: Any) -> dict[str, Any]:
    """What a resumed run must share with the checkpointed one: the input (by content), the
    training settings that shape the model and its data, and the pipeline's ``choices``."""
    fingerprint = input_fingerprint(source)
    kept = {k: getattr(settings, k) for k in ("seed", "batch_size", "lr", "latent", "ensemble", "weight_decay")}
    return {"input": None if fingerprint is None else fingerprint[:16], **kept, **choices}


def _finish(
    run: _Run, summary: dict[str, Any], learned: _Learned, files: dict[str, Path], kind: str, flagged: FlaggedRows
) -> LearnResult:
    """Complete a run's summary (final losses, seconds, transfers, files), write the run's
    ``report.html`` (a ``kind`` page), and ``summary.json`` last."""
    histories = learned.histories
    summary.update(
        epochs={
            "limit": learned.epoch_limit,
            "run": [len(h["train"]) for h in histories],
            "kept": [h["best_epoch"] or len(h["train"]) for h in histories],  # whose weights the models have
            "stopped_early": [h["stopped_early"] for h in histories],
        },
        final_loss={"train": [h["train"][-1] for h in histories], "val": [h["val"][-1] for h in histories]},
        converged=learned.warning is None,
        warnings=([] if learned.warning is None else [learned.warning]) + summary.get("warnings", []),
        seconds=run.timer.seconds,
        transfers=run.timer.transfers(),
        threads=learned.threads.to_dict(),
    )
    files[REPORT_NAME] = write_report(run.out, kind, summary, files, flagged=flagged)
    files["summary.json"] = write_summary(run.out, summary, files)
    return LearnResult(run.out, summary, files)


def run_ecg(
    source: Any,
    out: str | Path,
    *,
    settings: LearnSettings | None = None,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    device: str | torch.device = "auto",
    mode: str = ECG_MODE,
    width: int = BEAT_WIDTH,
    method: str = PEAK_METHOD,
    reference: str | Path | None = None,
    nan: str = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    epoch_progress: EpochProgress | None = None,
    count_transfers: bool = True,
    min_quality: float | None = None,
) -> LearnResult:
    """Read an ECG, find and cut its beats, train a VAE (or a vmap ensemble), score, write, plot.

    ``min_quality`` (a correlation in [-1, 1]) leaves beats in stretches of poor signal (their
    10-s stretch's median correlation with the recording's typical beat under it; see
    :meth:`~devicepipe.ecg.BeatQuality.in_good_signal`) out of training and out of the flags: they are still
    scored and written, never flagged, and counted in ``summary.json``'s ``quality``.

    ``reference`` (a WFDB annotation file or a table of R peaks with labels, such as the
    simulator's truth file) labels each beat by its nearest reference beat within 150 ms: the
    labels go into ``embeddings.parquet`` (column ``reference``) and the figures, and
    ``summary.json`` counts the beats and the flagged beats of each label.

    Beats are windows centred on each R peak by default (``mode="centered"``, 0.25 s before to
    0.45 s after): the notebook's peak-to-peak segmentation (``mode="seed"``) drops every
    premature beat followed by a compensatory pause, the very beats an anomaly score should
    find. Rows are resampled to ``width`` samples (a power of two) whatever the sampling rate.

    Writes to ``out``: ``summary.json`` (last, so a directory without it is incomplete),
    ``beats.parquet``, ``embeddings.parquet`` (peak, time, latent means, score, flag, spread),
    ``checkpoint.pt`` (or ``ensemble.pt``), ``history.csv`` and figures (``training.png``,
    ``latent.png``, ``generated.png`` and ``.pdf``, ``extremes.png``, ``excerpt.png``).
    """
    settings = settings or LearnSettings()
    vae = LightVAEConfig(width=width, latent=settings.latent)  # checked before anything is read or written
    ref = None if reference is None else read_reference(reference)
    if ref is not None and ref.symbols is None:
        raise DevicepipeError(
            f"reference {ref.source} has no beat labels; ecg needs labelled beats (a WFDB annotation file, "
            "or a table with a 'symbol' column such as the simulator's truth file)."
        )
    _check_min_quality(min_quality)
    run = _start(out, device, count_transfers, progress)
    identity = _identity(
        source, settings, channel=channel, sampling_rate=sampling_rate, method=method, mode=mode, width=width, nan=nan
    )
    if min_quality is not None:
        identity["min_quality"] = min_quality
    check_before_start(run.out, settings, identity)
    rec, peaks, beats = _read_and_cut(run, source, channel, sampling_rate, method, mode, nan, encoding)
    with run.stage("segment"):
        matrix = resample_rows(beats.matrix, width)
        quality = beat_quality(beats)
    usable = None if min_quality is None else quality.in_good_signal(min_quality)
    if usable is not None and matrix.shape[0] and int(usable.sum()) < MIN_BEATS_TO_TRAIN:
        raise DevicepipeError(
            f"only {int(usable.sum())} of {matrix.shape[0]} beats reach min_quality={min_quality}; "
            f"at least {MIN_BEATS_TO_TRAIN} are needed to train; lower it.",
            cli=f"only {int(usable.sum())} of {matrix.shape[0]} beats reach --min-quality {min_quality}; "
            f"at least {MIN_BEATS_TO_TRAIN} are needed to train; lower --min-quality.",
        )
    if matrix.shape[0] < MIN_BEATS_TO_TRAIN:
        problem = (
            f"only {matrix.shape[0]} beats were cut from {rec.source}; "
            f"at least {MIN_BEATS_TO_TRAIN} are needed to train"
        )
        raise DevicepipeError(
            f"{problem} (is it an ECG? is the sampling rate right?).",
            cli=f"{problem} (is it an ECG? is --sampling-rate right?).",
        )
    with run.stage("scale"):
        scaler = StandardScaler().fit((matrix if usable is None else matrix[usable]).reshape(-1))
        data = scaler.transform(matrix.reshape(-1)).reshape(matrix.shape)

    detector = _detector(settings, run.device, model="vae", width=vae.width, scaling="none")
    extra = {"scaler": scaler.state_dict(), "identity": identity}
    training = data if usable is None else data[usable]
    learned = _learn(run, detector, training, settings, extra, epoch_progress, f"{training.shape[0]:,} beats")
    if usable is not None:  # every beat scored against the model of the usable ones; poor beats never flagged
        every = learned.detector.score_details(data)
        learned = replace(learned, scores=replace(every, flags=every.flags & usable))
    scores, first = learned.scores, learned.models[0]
    with run.stage("score"):
        grid = latent_grid(scores.embeddings, 5)
        generated = first.decode(grid).detach()
        centre = first.decode(scores.embeddings.mean(0, keepdim=True)).detach()[0]
        order = torch.argsort(scores.scores)
        extreme_idx = torch.cat([order[-5:], order[:5]])  # the five highest scores, then the five lowest
        extreme_recon = reconstruct(first, data[extreme_idx])
        top_flagged = order.flip(0)[: int(scores.flags.sum())][:MAX_FLAGGED_ROWS]
        typical = data.median(0).values
    with run.stage("transfer"):
        host = scores.to_host() | _to_host(
            {
                "all_peaks": peaks,
                "peaks": beats.peaks,
                "kept": beats.kept,
                "grid": grid,
                "generated": generated,
                "centre": centre,
                "extreme_idx": extreme_idx,
                "extreme_recon": extreme_recon,
                "extreme_rows": data[extreme_idx],
                "top_flagged": top_flagged,
                "flagged_rows": data[top_flagged],
                "typical": typical,
            }
        )
        signal = rec.samples.cpu().numpy()
    fs = rec.sampling_rate
    with run.stage("hrv"):
        heart_rate = heart_rate_summary(peaks, fs)
    if ref is not None:
        host["truth"] = label_beats(_reference_in(ref, rec), ref.symbols, host["peaks"], fs)
    with run.stage("write"):
        files, leading = _scored_beat_files(run, rec, host, ref is not None, quality)
        files.update(write_scores(run.out, leading, host, learned.histories))
        beat_rate = width / beats.window_s  # Hz of the resampled beat rows
        files[MODEL_NAME] = learned.detector.save(run.out / MODEL_NAME, geometry=_beat_geometry(beats, method, width))
        args = (host, learned.histories, scores.threshold, beat_rate, learned.warning)
        files.update(ecg_figures(run.out, rec, signal, *args))
        files["quality.png"] = quality_figure(run.out, quality, beats.peaks, rec.n_samples, fs)
    flagged = np.flatnonzero(host["flags"])
    flagged = flagged[np.argsort(host["scores"][flagged])[::-1]]
    summary = {
        **input_summary(source, rec, run.device),
        "settings": {**settings.to_dict(), "mode": mode, "width": width, "method": method},
        "heart_rate": heart_rate,
        "counts": {
            "beats_found": int(host["all_peaks"].size),
            "beats_kept": int(host["peaks"].size),
            "flagged": int(flagged.size),
        },
        "threshold": scores.threshold,
        "threshold_means": (
            f"the {settings.percentile:g}th percentile of the training beats' scores; "
            + learned.detector.score_meaning(
                "a beat standardised by the recording's mean and standard deviation", "standard deviations"
            )
        ),
        "scorer": learned.detector.scorer_summary(),
        "flagged": [
            {"peak": int(host["peaks"][i]), "time_s": float(host["peaks"][i] / fs), "score": float(host["scores"][i])}
            | ({} if ref is None else {"reference": str(host["truth"][i])})
            for i in flagged
        ],
    }
    summary["quality"] = _quality_summary(quality, beats.peaks, rec.n_samples, fs, min_quality)
    if usable is not None:
        summary["quality"]["left_out_of_training_and_flags"] = int((~usable).sum())
    if ref is not None:
        summary["reference"] = _reference_counts(ref.source, host["truth"], host["flags"])
    page = _flagged_beats(host, fs, ref is not None)
    return _finish(run, summary, learned, files, "ecg", page)


def _scored_beat_files(
    run: _Run, rec: Recording, host: dict[str, np.ndarray], labelled: bool, quality: BeatQuality
) -> tuple[dict[str, Path], dict[str, np.ndarray]]:
    """The beat files of a scored run (every R peak with its quality, score and flag: NaN and
    False where the beat was not kept), and the leading columns of its per-beat table (peak,
    time, and the reference label when ``labelled``)."""
    fs, n = rec.sampling_rate, host["all_peaks"].size
    per_peak, flagged_peak = np.full(n, np.nan), np.zeros(n, bool)
    per_peak[host["kept"]], flagged_peak[host["kept"]] = host["scores"], host["flags"]
    files = write_beat_files(
        run.out, _record_name(rec), host["all_peaks"], host["kept"], fs, scores=per_peak, flags=flagged_peak,
        quality=_quality_columns(quality, host["kept"]),
    )  # fmt: skip
    leading = {"peak": host["peaks"], "time_s": host["peaks"] / fs}
    if labelled:
        leading["reference"] = host["truth"]
    return files, leading


def _flagged_beats(host: dict[str, np.ndarray], fs: float, labelled: bool) -> FlaggedRows:
    """The report's table of the highest-scoring flagged beats, each beside the typical one."""
    top = host["top_flagged"]
    return FlaggedRows(
        names=[f"{host['peaks'][i] / fs:,.1f} s" for i in top],
        scores=host["scores"][top],
        rows=host["flagged_rows"],
        typical=host["typical"],
        labels=[str(host["truth"][i]) for i in top] if labelled else None,
        unit="standard deviations of the recording",
        total=int(host["flags"].sum()),
    )


#: What a saved model's ``geometry_["input"]`` says it takes, and the command that trains one.
MODEL_INPUTS = {
    "ecg-beats": "ECG beats, from 'devicepipe ecg' or 'devicepipe train'",
    "load-windows": "windows of a load series, from 'devicepipe series'",
}


def model_input(model: Any, device: str | torch.device = "cpu") -> str | None:
    """What a saved model takes (a key of :data:`MODEL_INPUTS`, or None for rows fitted through
    the Python API); ``model`` is a run directory, a ``model.pt`` or a fitted detector."""
    detector = model if isinstance(model, BeatAnomalyDetector) else load_model(model, device)
    return (getattr(detector, "geometry_", {}) or {}).get("input")


def _fitted_model(model: Any, device: torch.device, takes: str) -> BeatAnomalyDetector:
    """A fitted model of ``takes`` (a key of :data:`MODEL_INPUTS`) from a path (a run directory
    or ``model.pt``) or a detector, on ``device``."""
    detector = model if isinstance(model, BeatAnomalyDetector) else load_model(model, device)
    if isinstance(model, BeatAnomalyDetector):
        detector.to(device)
    got = model_input(detector)
    if got != takes:
        what = MODEL_INPUTS.get(got or "", "rows of no known recording (fitted through the Python API)")
        raise DevicepipeError(f"the model takes {what}; this scores {MODEL_INPUTS[takes]}.")
    return detector


def beat_rows(matrix: torch.Tensor, width: int) -> torch.Tensor:
    """A recording's beat matrix ``(n, w)`` as a beat model takes it: resampled to ``width``
    columns and standardised by the beats' own mean and standard deviation (over every value)."""
    rows = resample_rows(matrix, width)
    return StandardScaler().fit(rows.reshape(-1)).transform(rows.reshape(-1)).reshape(rows.shape)


def run_score(
    source: Any,
    out: str | Path,
    *,
    model: str | Path | BeatAnomalyDetector,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    device: str | torch.device = "auto",
    reference: str | Path | None = None,
    nan: str = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    count_transfers: bool = True,
) -> LearnResult:
    """Score every beat of an ECG with a model trained earlier (by ``ecg`` or ``train``), against
    the model's own threshold.

    The beats are found and cut as the model's were (its ``geometry_``: detector, segmentation,
    window), resampled to its width and standardised by this recording's own beats, so a model
    takes recordings of any sampling rate and gain. Each beat gets its score, flag (score
    above the model's threshold) and tail probability (the share of the model's training
    beats scoring at least as high). ``reference`` labels the beats as in :func:`run_ecg`;
    the summary then gives the flag rate per label and per AAMI class.

    Writes to ``out``: ``beats.parquet``/``.csv`` and ``RECORD.qrs`` (scores and flags),
    ``scores.parquet`` (peak, time, latent means, score, flag, spread, tail probability),
    ``scores.png``, ``latent.png``, ``extremes.png``, ``excerpt.png``, ``heart_rate.png``,
    ``report.html``, and ``summary.json`` last.
    """
    dev = resolve_device(device)
    detector = _fitted_model(model, dev, "ecg-beats")
    geometry = detector.geometry_
    ref = None if reference is None else read_reference(reference)
    run = _start(out, dev, count_transfers, progress)
    rec, peaks, beats = _read_and_cut(
        run, source, channel, sampling_rate, geometry["method"], geometry["mode"], nan, encoding
    )
    if beats.matrix.shape[0] == 0:
        raise _no_beats(rec, peaks)
    with run.stage("scale"):
        data = beat_rows(beats.matrix, detector.n_features_in_)
    with run.stage("score"):
        scores = detector.score_details(data)
        tail = detector.tail_of(scores.scores)
        order = torch.argsort(scores.scores)
        extreme_idx = torch.cat([order[-5:], order[:5]])
        prepared = resample_rows(data[extreme_idx], detector.width_)
        extreme_recon = reconstruct(detector.models_[0], prepared)
        top_flagged = order.flip(0)[: int(scores.flags.sum())][:MAX_FLAGGED_ROWS]
        typical = data.median(0).values
    with run.stage("transfer"):
        host = scores.to_host() | _to_host(
            {
                "all_peaks": peaks,
                "peaks": beats.peaks,
                "kept": beats.kept,
                "tail": tail,
                "extreme_idx": extreme_idx,
                "extreme_rows": prepared,
                "extreme_recon": extreme_recon,
                "top_flagged": top_flagged,
                "flagged_rows": data[top_flagged],
                "typical": typical,
                "train_scores": detector.train_scores_,
            }
        )
        signal = rec.samples.cpu().numpy()
    fs = rec.sampling_rate
    with run.stage("hrv"):
        heart_rate = heart_rate_summary(peaks, fs)
    if ref is not None:
        host["truth"] = label_beats(_reference_in(ref, rec), ref.symbols, host["peaks"], fs)
    with run.stage("write"):
        files, leading = _scored_beat_files(run, rec, host, ref is not None, beat_quality(beats))
        files.update(write_score_table(run.out, leading, host))
        files.update(score_figures(run.out, rec, signal, host, detector.threshold_, detector.width_ / beats.window_s))
    flagged = np.flatnonzero(host["flags"])
    flagged = flagged[np.argsort(host["scores"][flagged])[::-1]]
    summary = {
        **input_summary(source, rec, run.device),
        "model": _model_summary(detector, "training_beats"),
        "heart_rate": heart_rate,
        "counts": {
            "beats_found": int(host["all_peaks"].size),
            "beats_kept": int(host["peaks"].size),
            "flagged": int(flagged.size),
        },
        "threshold": detector.threshold_,
        "threshold_means": (
            f"the model's own threshold, {detector.threshold_rule}; "
            + detector.score_meaning("a beat standardised by this recording's beats", "standard deviations")
        ),
        "scorer": detector.scorer_summary(),
        "flag_rate": float(host["flags"].mean()),
        "flagged": [
            {
                "peak": int(host["peaks"][i]),
                "time_s": float(host["peaks"][i] / fs),
                "score": float(host["scores"][i]),
                "tail_probability": float(host["tail"][i]),
            }
            | ({} if ref is None else {"reference": str(host["truth"][i])})
            for i in flagged
        ],
        "seconds": run.timer.seconds,
        "transfers": run.timer.transfers(),
        "threads": detector.threads_.to_dict(),
        "warnings": rate_warnings(host["all_peaks"], fs, rec.n_samples),
    }
    if ref is not None:
        summary["reference"] = _reference_counts(ref.source, host["truth"], host["flags"])
    page = _flagged_beats(host, fs, ref is not None)
    files[REPORT_NAME] = write_report(run.out, "score", summary, files, flagged=page)
    files["summary.json"] = write_summary(run.out, summary, files)
    return LearnResult(run.out, summary, files)


@dataclass(frozen=True)
class _Source:
    """One recording of a training population, and its R peaks when a ``beats`` run found them."""

    path: Path
    peaks_file: Path | None = None  # the beats.parquet of a dataset ``beats`` run


def _population(spec: str | Path, out: Path) -> tuple[list[_Source], str]:
    """The recordings a ``train`` input names: a dataset directory of a ``beats`` run (each
    recording with its ``beats.parquet``), or a folder, glob, list or single recording."""
    path = Path(spec)
    index = path / INDEX_NAME
    if path.is_dir() and index.is_file():
        table = pq.read_table(index, columns=["path", "run", "status"]).to_pylist()
        sources = [
            _Source(Path(r["path"]), path / r["run"] / "beats.parquet")
            for r in table
            if r["status"] == "ok" and (path / r["run"] / "beats.parquet").is_file()
        ]
        if not sources:
            raise DevicepipeError(f"{index} lists no complete recording with a beats.parquet; run 'beats' on it first.")
        return sources, f"the beats of dataset run {path}"
    if is_dataset(spec):
        found = find_recordings(spec, exclude=out)
        n = len(found.paths)
        return [_Source(p) for p in found.paths], f"{n} recording{'s' if n != 1 else ''} of {spec}"
    return [_Source(path)], str(spec)


def _population_identity(sources: list[_Source], settings: LearnSettings, **choices: Any) -> dict[str, Any]:
    """What a resumed ``train`` must share with its checkpoint: the recordings (by path, size and
    modification time, not content: a population may be large) and the settings."""
    digest = hashlib.sha256()
    for src in sources:
        for file in (src.path, src.peaks_file):
            if file is not None and file.exists():
                stat = file.stat()
                digest.update(f"{file.resolve()}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    kept = {k: getattr(settings, k) for k in ("seed", "batch_size", "lr", "latent", "ensemble", "weight_decay")}
    return {"input": digest.hexdigest()[:16], **kept, **choices}


def _stored_peaks(file: Path, device: torch.device) -> torch.Tensor:
    """The R peaks a ``beats`` run wrote to ``file`` (its ``peak`` column), on ``device``."""
    try:
        peaks = pq.read_table(file, columns=["peak"]).column("peak").to_numpy()
    except (OSError, KeyError, pa.ArrowException) as exc:
        raise DevicepipeError(f"cannot read the R peaks in {file} ({str(exc).splitlines()[0]}).") from None
    return torch.from_numpy(np.ascontiguousarray(peaks, dtype=np.int64)).to(device)


#: Why ``train`` scores by the reconstruction error unless told otherwise.
POPULATION_SCORER_WHY = (
    "the default of a model for other recordings: a new recording's normal beats lie farther from the training "
    "beats than those lie from the beats of their own recordings, so distances to the training beats flag too "
    "many of a new recording's beats; the reconstruction error does not depend on that"
)


def run_train(
    source: str | Path,
    out: str | Path,
    *,
    settings: LearnSettings | None = None,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    device: str | torch.device = "auto",
    mode: str = ECG_MODE,
    width: int = BEAT_WIDTH,
    method: str = PEAK_METHOD,
    nan: str = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    recording_progress: Callable[[int, int], None] | None = None,
    epoch_progress: EpochProgress | None = None,
    count_transfers: bool = True,
    memory_budget: int | None = None,
    min_quality: float | None = None,
) -> LearnResult:
    """Train one beat model on the beats of many recordings: a population's model of normal.

    ``source`` is a folder, glob or list of ECG recordings (beats found as ``ecg`` finds
    them), or the directory of a dataset ``beats`` run (its recordings with the R peaks it
    wrote, so nothing is detected twice). Each recording's beats are cut, resampled to
    ``width`` and standardised by their own mean and deviation (gains and units differ
    between recordings), then all train one VAE (or ensemble) on the device; a recording that
    cannot be read is left out and named in the summary. ``recording_progress(done, total)``
    after each recording. Under ``torchrun`` each process trains its share of every batch
    (DistributedDataParallel); rank 0 writes. Beats beyond ``memory_budget`` bytes (default: a
    quarter of the device's free memory) are held in host memory and streamed to the device a
    batch at a time, with the same result. ``min_quality`` (a correlation in [-1, 1]) leaves out
    of training each recording's beats in stretches of poor signal
    (:meth:`devicepipe.ecg.BeatQuality.in_good_signal`); a recording with none above it is left out.

    Writes to ``out``: ``model.pt`` (what ``score`` takes), ``checkpoint.pt`` (or
    ``ensemble.pt``), ``recordings.parquet`` (per recording: beats trained on, poor beats left
    out, flagged, median score),
    ``history.csv``, ``training.png``, ``latent.png``, ``scores.png``, ``report.html``, and
    ``summary.json`` last.
    """
    settings = settings or LearnSettings()
    vae = LightVAEConfig(width=width, latent=settings.latent)
    _check_min_quality(min_quality)
    run = _start(out, device, count_transfers, progress)
    sources, described = _population(source, run.out)
    choices = dict(channel=channel, sampling_rate=sampling_rate, method=method, mode=mode, width=width, nan=nan)
    if min_quality is not None:
        choices["min_quality"] = min_quality
    identity = _population_identity(sources, settings, **choices)
    check_before_start(run.out, settings, identity)
    run.note(f"cutting the beats of {described}")
    parts, used, skipped = [], [], []
    window_s = None
    budget = memory_budget if memory_budget is not None else free_memory(run.device) // 4
    held, stream = 0, False
    for i, src in enumerate(sources):
        try:
            rec = _read_ecg(run, str(src.path), channel, sampling_rate, nan, encoding)
            with run.stage("detect"):
                peaks = (
                    _find_peaks(rec, method, channel)
                    if src.peaks_file is None
                    else _stored_peaks(src.peaks_file, run.device)
                )
            rec, _ = _first_lead(rec)
            with run.stage("segment"):
                beats = ecg_segment(rec.samples, peaks, rec.sampling_rate, mode=mode)
            if beats.matrix.shape[0] == 0:
                raise _no_beats(rec, peaks)
            left_out = 0
            if min_quality is not None:
                with run.stage("segment"):
                    usable = beat_quality(beats).in_good_signal(min_quality)
                left_out = int((~usable).sum())
                if left_out == usable.numel():
                    raise DevicepipeError(
                        f"no beat of {rec.source} reaches min_quality={min_quality:g}; lower it",
                        cli=f"no beat of {rec.source} reaches --min-quality {min_quality:g}; lower --min-quality",
                    )
            with run.stage("scale"):
                rows = beat_rows(beats.matrix, width)
                if left_out:
                    rows = rows[usable]
            held += rows.numel() * rows.element_size()
            if held > budget and not stream:  # from here on the beats wait in host memory
                stream = True
                run.note(f"the beats pass the memory budget ({held:,} bytes): held in host memory, streamed")
                parts = [p.cpu() for p in parts]
            parts.append(rows.cpu() if stream else rows)
            used.append(
                {
                    "path": str(src.path),
                    "beats": int(rows.shape[0]),
                    "poor_left_out": left_out,
                    "rate_hz": rec.sampling_rate,
                }
            )
            window_s = beats.window_s
            geometry_beats = beats
        except DevicepipeError as exc:
            if len(sources) == 1:
                raise  # one recording named: its own error, as every command gives it
            skipped.append({"path": str(src.path), "error": exc.cli_message.rstrip(".")})
        if recording_progress is not None:
            recording_progress(i + 1, len(sources))
    n_beats = sum(u["beats"] for u in used)
    if n_beats < MIN_BEATS_TO_TRAIN:
        first = f"; the first failure: {skipped[0]['path']}: {skipped[0]['error']}" if skipped else ""
        raise DevicepipeError(
            f"only {n_beats} beats were cut from {described}; at least {MIN_BEATS_TO_TRAIN} are needed to train{first}."
        )
    data = torch.cat(parts)
    del parts
    if stream and run.device.type == "cuda":
        data = data.pin_memory()  # copies of pinned memory to the GPU are faster and can overlap
    # a model for other recordings scores by its reconstruction error: a new recording's normal
    # beats lie farther from the training beats than those lie from their own recordings' beats,
    # so distances to the training beats flag too many of them (tests/cli/test_models.py)
    detector = _detector(settings, run.device, scorer="reconstruction", model="vae", width=vae.width, scaling="none")
    learned = _learn(
        run,
        detector,
        data,
        settings,
        {"identity": identity},
        epoch_progress,
        f"{n_beats:,} beats of {len(used)} recordings",
    )
    if distributed()[0] != 0:  # rank 0 writes the run; the others only trained their share
        return LearnResult(run.out, {"rank": distributed()[0]}, {})
    scores = learned.scores
    with run.stage("transfer"):
        host = scores.to_host() | _to_host({"train_scores": detector.train_scores_})
    bounds = np.cumsum([0] + [u["beats"] for u in used])
    for u, a, b in zip(used, bounds[:-1], bounds[1:], strict=True):
        u["flagged"] = int(host["flags"][a:b].sum())
        u["median_score"] = float(np.median(host["scores"][a:b]))
    with run.stage("write"):
        files = {
            MODEL_NAME: detector.save(run.out / MODEL_NAME, geometry=_beat_geometry(geometry_beats, method, width))
        }
        files["recordings.parquet"] = write_parquet(
            {k: [u[k] for u in used] for k in ("path", "beats", "poor_left_out", "rate_hz", "flagged", "median_score")},
            run.out / "recordings.parquet",
        )
        files.update(
            write_scores(
                run.out, {"recording": np.repeat(np.arange(len(used)), np.diff(bounds))}, host, learned.histories
            )
        )
        figures = train_figures(run.out, host, learned.histories, scores.threshold, len(used), learned.warning)
        files.update(figures)
    summary = {
        "input": str(source),
        "device": str(run.device),
        "recordings": {"used": len(used), "skipped": skipped, "described": described},
        "settings": {**settings.to_dict(), "mode": mode, "width": width, "method": method},
        "counts": {"beats": n_beats, "flagged": int(host["flags"].sum())},
        "window_s": window_s,
        "threshold": scores.threshold,
        "threshold_means": (
            f"{detector.threshold_rule}; "
            + detector.score_meaning("a beat standardised by its own recording's beats", "standard deviations")
        ),
        "scorer": detector.scorer_summary(None if settings.scorer else POPULATION_SCORER_WHY),
        "distributed": distributed_summary(),
        "streamed": {"from_host": stream, "bytes": held, "budget_bytes": budget},
        "warnings": [f"{len(skipped)} recording(s) left out (see recordings.skipped in summary.json)"]
        if skipped
        else [],
    }
    if min_quality is not None:
        summary["quality"] = {
            "measure": "correlation with the recording's typical beat; stretch: its median over 10 s",
            "min_quality": min_quality,
            "left_out_of_training": sum(u["poor_left_out"] for u in used),
        }
    return _finish(run, summary, learned, files, "train", None)


def _reference_counts(source: str, truth: np.ndarray, flags: np.ndarray) -> dict[str, Any]:
    """Per reference label (``""``: no reference beat within 150 ms) and per AAMI class (EC57's
    N, S, V, F, Q), the beats, the flagged beats and the share flagged."""
    labels, classes = {}, {}
    for value in sorted(set(truth.tolist())):
        sel = truth == value
        labels[value or "none"] = {"beats": int(sel.sum()), "flagged": int(flags[sel].sum())}
    aami = np.array([aami_class(v) or "" for v in truth.tolist()], dtype=str)
    for name in AAMI_CLASSES:
        sel = aami == name
        if sel.any():
            n, k = int(sel.sum()), int(flags[sel].sum())
            classes[name] = {"beats": n, "flagged": k, "flag_rate": k / n}
    return {"source": source, "tolerance_s": MATCH_TOLERANCE_S, "labels": labels, "aami": classes}


def _load_times(source: Any, time_column: str | int | None, need: str) -> tuple[str | int | None, bool]:
    """A load series' time column: the one named, else a file's first column of times
    (:func:`~devicepipe.io.channels.time_column_of`), else None for an in-memory table (whose
    DatetimeIndex the read takes); and whether it was found rather than named. A file with no
    column of times is refused in one line that begins with ``need``."""
    found = time_column is None
    time_column = time_column_of(source) if found else time_column
    if time_column is None and isinstance(source, (str, os.PathLike)):
        where = f"found no column of times in {Path(source).name}"
        raise DevicepipeError(
            f"{need}: {where}; pass time_column= (e.g. time_column='Datetime').",
            cli=f"{need}: {where}; pass --time-column (e.g. --time-column Datetime).",
        )
    return time_column, found


def _read_load(
    run: _Run,
    source: Any,
    column: str | int | None,
    times: tuple[str | int | None, bool],
    time_format: str | None,
    nan: str,
    encoding: str | None,
) -> tuple[Recording, TimeReport]:
    """One value column of a load series onto the run's device, sorted by its times, duplicate
    times averaged; the recording and its time report. ``times``: :func:`_load_times`' answer
    (a column found rather than named is said)."""
    time_column, found = times
    if found and time_column is not None:
        run.note(f"times from column {time_column!r}; --time-column picks another")
    with run.stage("read"):
        rec = read_series(
            source,
            column,
            device=run.device,
            time_column=time_column,
            time_format=time_format,
            duplicates="mean",
            nan=nan,
            encoding=encoding,
        )
    if rec.samples.ndim != 1:
        problem = f"{rec.source} has {rec.n_channels} value columns"
        raise DevicepipeError(f"{problem}; choose one with column=.", cli=f"{problem}; choose one with --column.")
    report = rec.time_report
    if report is None:
        raise DevicepipeError(
            f"the {rec.source} has no times: give a DataFrame with a DatetimeIndex, or name its column of times "
            "with time_column=."
        )
    run.note(f"read {report.summary()}; {rec.n_samples:,} time points after that")
    return rec, report


def run_series(
    source: Any,
    out: str | Path,
    *,
    column: str | int | None = None,
    time_column: str | int | None = None,
    time_format: str | None = None,
    window: str = SERIES_WINDOW,
    pointwise: bool = False,
    settings: LearnSettings | None = None,
    hidden: int = SERIES_HIDDEN,
    device: str | torch.device = "auto",
    nan: str = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    epoch_progress: EpochProgress | None = None,
    count_transfers: bool = True,
) -> LearnResult:
    """Windows of a load series, MinMax scaling, the MLP autoencoder, anomalous windows.

    ``source``: a CSV or Parquet file, or an in-memory table (pandas, Polars, PyArrow). The
    times are ``time_column``'s; with none named, a file's first column of times
    (:func:`~devicepipe.io.channels.time_column_of`) or a pandas DataFrame's DatetimeIndex.
    Duplicate timestamps are averaged and gaps filled (up to two steps per window) or the
    window dropped, all reported in ``summary.json``. ``pointwise`` trains the notebook's
    per-sample autoencoder (input size 1) instead and scores each window by the mean error
    of its samples. Writes ``summary.json`` (last), ``embeddings.parquet`` (window start,
    latent code, score, flag, spread), ``checkpoint.pt`` (or ``ensemble.pt``),
    ``history.csv`` and figures (``training.png``, ``latent.png``, ``extremes.png``,
    ``days.png``). ``settings`` defaults to :class:`SeriesLearnSettings`.
    """
    settings = settings or SeriesLearnSettings()
    window_s = parse_duration(window)
    # one sample's distance to its nearest samples says nothing of the window it is in
    if pointwise and settings.scorer not in (None, "reconstruction"):
        raise DevicepipeError(
            f"scorer {settings.scorer!r} cannot score single samples; pointwise models use scorer='reconstruction'.",
            cli=f"--scorer {settings.scorer} cannot score single samples; drop it with --pointwise.",
        )
    time_column, found = _load_times(source, time_column, "a load series needs its time column")
    run = _start(out, device, count_transfers, progress)
    identity = _identity(
        source,
        settings,
        column=column,
        time_column=time_column,
        time_format=time_format,
        window=window,
        pointwise=pointwise,
        hidden=hidden,
        nan=nan,
    )
    check_before_start(run.out, settings, identity)
    default_scorer = "reconstruction" if pointwise else DEFAULT_SCORER
    rec, report = _read_load(run, source, column, (time_column, found), time_format, nan, encoding)
    with run.stage("window"):
        wins = make_windows(rec.samples, rec.timestamps, window_s=window_s, step_s=report.step_s)
    if wins.values.shape[0] < MIN_WINDOWS_TO_TRAIN:
        raise DevicepipeError(
            f"only {wins.values.shape[0]} complete windows of {window}; need at least {MIN_WINDOWS_TO_TRAIN}."
        )
    per = wins.per_window
    raw = wins.values.reshape(-1, 1) if pointwise else wins.values  # the notebook's model sees one sample at a time
    # MinMax scaling to [0, 1] (fitted on every value), the MLP's sigmoid output
    detector = _detector(
        settings, run.device, scorer=default_scorer, model="mlp", width=raw.shape[1], hidden=hidden, scaling="minmax"
    )
    extra = {"window_s": window_s, "identity": identity}
    what = f"{raw.shape[0]:,} {'samples' if pointwise else 'windows'} of {per} steps"
    learned = _learn(run, detector, raw, settings, extra, epoch_progress, what)
    scaler = detector.scaler_
    rows = scaler.transform(raw.reshape(-1)).reshape(raw.shape).float()
    data = rows.reshape(wins.values.shape)
    with run.stage("score"):
        scores = group_scores(learned.scores, per, settings.percentile) if pointwise else learned.scores
        recon = reconstruct(learned.models[0], rows).reshape(data.shape)
        raw_recon = scaler.inverse_transform(recon.reshape(-1)).reshape(recon.shape)
    with run.stage("transfer"):
        host = scores.to_host() | _to_host({"days": wins.values, "recon": raw_recon})
    flagged = np.array([i for i in np.argsort(host["scores"])[::-1] if host["flags"][i]], dtype=np.int64)
    with run.stage("write"):
        leading = {"start": wins.starts, "filled_slots": wins.filled}
        files = write_scores(run.out, leading, host, learned.histories)
        geometry = {"input": "load-windows", "window": window, "steps_per_window": per, "pointwise": pointwise}
        files[MODEL_NAME] = learned.detector.save(run.out / MODEL_NAME, geometry=geometry)
        args = (host, learned.histories, scores.threshold, rec.channels[0], pointwise, flagged, learned.warning)
        files.update(series_figures(run.out, wins, *args))
    summary = {
        **input_summary(source, rec, run.device, channel_key="column"),
        "time_column": time_column if time_column is not None else "the DataFrame's DatetimeIndex",
        "window": window,
        "steps_per_window": per,
        "pointwise": pointwise,
        "settings": {**settings.to_dict(), "hidden": hidden},
        "time": report.to_dict(),
        "windows": _windows_summary(wins),
        "threshold": scores.threshold,
        "threshold_means": (
            f"the {settings.percentile:g}th percentile of the training windows' scores; "
            + detector.score_meaning(
                f"a {'sample' if pointwise else 'window'} scaled to [0, 1] by the series' minimum and maximum",
                "fractions of that range",
            )
            + (f"; a window's score is the mean of its {per} samples'" if pointwise else "")
        ),
        "scorer": detector.scorer_summary(
            "pointwise: one sample's distance to other samples says nothing of its window" if pointwise else None
        ),
        "flagged": [{"start": str(wins.starts[i])[:19], "score": float(host["scores"][i])} for i in flagged],
    }
    page = _flagged_windows(wins, host, flagged, rec.channels[0])
    return _finish(run, summary, learned, files, "series", page)


def _model_summary(detector: BeatAnomalyDetector, rows_key: str) -> dict[str, Any]:
    """``summary.json``'s account of the model a ``score`` run used (``rows_key`` names its
    training rows: beats or windows); its path is None for one fitted in this process."""
    return {
        "path": getattr(detector, "path_", None),
        "trained_on_device": getattr(detector, "trained_on_", None),
        "versions": getattr(detector, "versions_", None),
        "geometry": detector.geometry_,
        "members": len(detector.models_),
        rows_key: detector.fit_rows_["rows"],
    }


def _windows_summary(wins: Windows) -> dict[str, Any]:
    """``summary.json``'s account of a load series' windows: used, gaps filled, dropped."""
    return {
        "used": int(wins.values.shape[0]),
        "filled_slots": int(wins.filled.sum()),
        "windows_with_filled_slots": int((wins.filled > 0).sum()),
        "dropped": [str(d)[:19] for d in wins.dropped],
    }


def _flagged_windows(wins: Windows, host: dict[str, np.ndarray], flagged: np.ndarray, unit: str) -> FlaggedRows:
    """The report's list of flagged windows (``flagged``: indices, highest score first)."""
    top = flagged[:MAX_FLAGGED_ROWS]
    return FlaggedRows(
        names=[str(wins.starts[i])[:10] for i in top],
        scores=host["scores"][top],
        rows=host["days"][top],
        typical=np.median(host["days"], axis=0),
        unit=unit,
        total=int(flagged.size),
    )


def run_score_series(
    source: Any,
    out: str | Path,
    *,
    model: str | Path | BeatAnomalyDetector,
    column: str | int | None = None,
    time_column: str | int | None = None,
    time_format: str | None = None,
    device: str | torch.device = "auto",
    nan: str = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    count_transfers: bool = True,
) -> LearnResult:
    """Score every window of a load series with a model trained earlier by :func:`run_series`,
    against the model's own threshold: the days (or other windows) of a new period judged by
    a model of what was normal before.

    The series is read as :func:`run_series` reads it (``source``, ``column``, ``time_column``:
    the same choices) and cut into windows of the model's length; its time step must be the
    model's (24 steps to a day for a model of hourly days). The windows are scaled by the
    model's own minimum and maximum (those of its training series), so a period of higher
    load than any it saw scores high. Each window gets its score, flag (score above the
    model's threshold) and tail probability (the share of the model's training windows
    scoring at least as high). A per-sample model (``series --pointwise``) is refused.

    Writes to ``out``: ``scores.parquet`` (window start, filled slots, codes, score, flag,
    spread, tail probability), ``scores.png``, ``latent.png``, ``extremes.png``, ``days.png``,
    ``report.html``, and ``summary.json`` last.
    """
    dev = resolve_device(device)
    detector = _fitted_model(model, dev, "load-windows")
    geometry = detector.geometry_
    if geometry.get("pointwise"):
        raise DevicepipeError(
            "the model is a per-sample autoencoder (series --pointwise): it scores samples, not windows; "
            "train a model of whole windows (series without --pointwise) to score a new period."
        )
    time_column, found = _load_times(source, time_column, "the model scores windows of a load series")
    window = str(geometry["window"])
    window_s = parse_duration(window)
    run = _start(out, dev, count_transfers, progress)
    rec, report = _read_load(run, source, column, (time_column, found), time_format, nan, encoding)
    with run.stage("window"):
        wins = make_windows(rec.samples, rec.timestamps, window_s=window_s, step_s=report.step_s)
    per = int(geometry["steps_per_window"])
    if wins.per_window != per:
        raise DevicepipeError(
            f"the model takes windows of {window} in {per} steps of {format_duration(window_s / per)}; "
            f"{rec.source} has a step of {format_duration(report.step_s)} ({wins.per_window} to a window): "
            "give the series at the model's step."
        )
    if wins.values.shape[0] == 0:
        raise DevicepipeError(f"{rec.source} holds no complete window of {window} to score.")
    with run.stage("score"):
        scores = detector.score_details(wins.values)
        tail = detector.tail_of(scores.scores)
        scaler = detector.scaler_
        rows = scaler.transform(wins.values.reshape(-1)).reshape(wins.values.shape).float()
        recon = reconstruct(detector.models_[0], rows)
        raw_recon = scaler.inverse_transform(recon.reshape(-1)).reshape(recon.shape)
    with run.stage("transfer"):
        host = scores.to_host() | _to_host(
            {"days": wins.values, "recon": raw_recon, "tail": tail, "train_scores": detector.train_scores_}
        )
    flagged = np.array([i for i in np.argsort(host["scores"])[::-1] if host["flags"][i]], dtype=np.int64)
    with run.stage("write"):
        files = write_score_table(run.out, {"start": wins.starts, "filled_slots": wins.filled}, host)
        files.update(series_score_figures(run.out, wins, host, detector.threshold_, rec.channels[0], flagged))
    summary = {
        **input_summary(source, rec, run.device, channel_key="column"),
        "time_column": time_column if time_column is not None else "the DataFrame's DatetimeIndex",
        "model": _model_summary(detector, "training_windows"),
        "window": window,
        "steps_per_window": per,
        "time": report.to_dict(),
        "windows": _windows_summary(wins),
        "threshold": detector.threshold_,
        "threshold_means": (
            f"the model's own threshold, {detector.threshold_rule}; "
            + detector.score_meaning(
                "a window scaled to [0, 1] by the minimum and maximum of the model's training series",
                "fractions of that range",
            )
        ),
        "scorer": detector.scorer_summary(),
        "flag_rate": float(host["flags"].mean()),
        "flagged": [
            {
                "start": str(wins.starts[i])[:19],
                "score": float(host["scores"][i]),
                "tail_probability": float(host["tail"][i]),
            }
            for i in flagged
        ],
        "seconds": run.timer.seconds,
        "transfers": run.timer.transfers(),
        "threads": detector.threads_.to_dict(),
    }
    page = _flagged_windows(wins, host, flagged, rec.channels[0])
    files[REPORT_NAME] = write_report(run.out, "score-series", summary, files, flagged=page)
    files["summary.json"] = write_summary(run.out, summary, files)
    return LearnResult(run.out, summary, files)


@dataclass(frozen=True)
class DemoResult:
    """What :func:`run_demo` simulated, the ``ecg`` run on it, and how many ectopic beats it flagged."""

    run: LearnResult
    input: Path  # the simulated recording
    truth: Path  # its R peaks and their symbols
    n_beats: int
    n_ectopic: int  # simulated ventricular ectopic beats
    ectopic_flagged: int  # of the ectopic beats labelled V by the truth file (within 150 ms), how many were flagged


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
