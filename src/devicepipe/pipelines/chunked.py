"""Beats of a recording longer than memory: read and detected a chunk at a time, the beat matrix
written a part at a time."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.artifacts.summaries import HolterSummary
from devicepipe.artifacts.write import remove_stale
from devicepipe.core.device import free_memory, release_freed_memory
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.spill import Spill, Stored
from devicepipe.core.units import parse_duration
from devicepipe.ecg import (
    Beats,
    detection_chunk,
    ecg_peaks_fused_chunked_to,
    ecg_segment_chunked,
    methods_that,
    segment_kept_parts,
)
from devicepipe.io import (
    ReferenceBeats,
    read_series,
    staged_dir,
)
from devicepipe.io.chunks import chunk_reader, recording_length, samples_at_most
from devicepipe.io.read import check_rate, chosen_rate, header_sampling_rate
from devicepipe.pipelines import context
from devicepipe.pipelines.beats_finish import BeatsOptions, beats_result, check_beats, write_beats
from devicepipe.pipelines.classes import label_beats_chunked
from devicepipe.pipelines.context import PEAK_METHOD, Run
from devicepipe.pipelines.quality import excerpt_start, quality_stored, quality_summary_stored, stored_quality
from devicepipe.pipelines.reading import unknown_rate
from devicepipe.pipelines.results import BeatsResult

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
    if method not in methods_that("chunks"):
        able = methods_that("chunks")
        raise DevicepipeError(
            f"{{param}} is made for the {' or '.join(able)} method, not {method}",
            fix=f"use {{method={able[0]!r}}}, or drop {{chunk}}.",
            param="chunk",
            value=method,
        )
    if isinstance(chunk, str):
        parse_duration(chunk)  # (a clear error for a duration that is not one)
    elif chunk < 1:
        raise DevicepipeError(f"chunk must be a positive number of samples, got {chunk}.")


def chunk_size(source: Any, opts: BeatsOptions, device: torch.device) -> int | None:
    """Samples per chunk for this recording, or None to detect it in one piece (every lead of
    it, where its beats are to be found on several)."""
    channel, leads = (opts.channel[0], len(opts.channel)) if isinstance(opts.channel, list) else (opts.channel, 1)
    if opts.chunk is None and not isinstance(source, (str, Path)):
        return None
    if opts.chunk is not None:
        if not isinstance(source, (str, Path)):
            raise DevicepipeError("chunk= needs a recording file (chunks are read from it), not an in-memory array.")
        _check_chunk(opts.chunk, opts.method)
        if isinstance(opts.chunk, str):
            rate = chosen_rate(opts.sampling_rate, header_sampling_rate(Path(source), channel), Path(source).name)
            if rate is None:
                raise unknown_rate(source)
            return max(1, int(round(parse_duration(opts.chunk) * rate)))
        return int(opts.chunk)
    if opts.method not in methods_that("chunks") or opts.nan != "error":
        return None
    budget = opts.memory_budget if opts.memory_budget is not None else free_memory(device) // 4
    try:
        if samples_at_most(source, channel) * leads * BYTES_PER_SAMPLE <= budget:
            return None  # it fits (a CSV plainly small enough is not counted first)
        n = recording_length(source, channel) * leads
    except (DevicepipeError, OSError):
        return None  # read in one piece, which says what is wrong with it (a missing file, ...)
    return AUTO_CHUNK_SAMPLES if n * BYTES_PER_SAMPLE > budget else None


def run_beats_chunked(run: Run, source: Any, ref: ReferenceBeats | None, opts: BeatsOptions, size: int) -> BeatsResult:
    """:func:`run_beats` with the recording read, detected and cut ``size`` samples at a time
    (memory flat in its length); the beat matrix goes straight to its file."""
    if opts.nan != "error":
        raise DevicepipeError(
            f"{{param}} {opts.nan} needs the whole recording in memory",
            fix="detect it in one piece: drop {chunk} (and {memory_budget}).",
            param="nan",
            value=opts.nan,
        )
    leads, reads, n, fs = _lead_readers(run, source, opts)
    channel, read = leads[0], reads[0]
    # no stage in chunks smaller than detection's smallest (a few seconds): a --chunk of 1ms had
    # segmentation cut a 1-hour recording one sample at a time
    size = max(size, detection_chunk(1, fs))
    run.note(f"finding beats in {n:,} samples at {fs:g} Hz on {run.device}, {size:,} samples at a time")
    with Spill() as held:  # what grows with the recording (peaks, kept beats, quality) waits on disk
        peaks, kept = Stored(held, "peaks"), Stored(held, "kept")
        with run.stage("detect", count=False):
            ecg_peaks_fused_chunked_to(
                held, reads, n, fs, chunk=size,
                progress=lambda done, total: run.note(f"finding beats: {100 * done / total:.0f} %"),
            )  # fmt: skip
        release_freed_memory()  # the chunks' blocks, freed, would hold the resident size up
        found_on = {"beats_found_on_leads": [str(lead) for lead in leads]} if len(leads) > 1 else {}
        if found_on:
            run.note(f"beats found on all {len(leads)} leads together, cut from {channel}")
        with run.stage("read"):  # ten seconds for the excerpt (and the channel's name and unit)
            first = excerpt_start(peaks, n, fs)
            rec = read_series(
                source, channel, device=run.device, sampling_rate=fs,
                start=first, stop=min(n, first + int(round(10 * fs))), encoding=opts.encoding,
            )  # fmt: skip
        labelled = label_beats_chunked(run, reads, n, peaks, fs, size)
        release_freed_memory()
        checked = check_beats(run, rec, n, peaks, peaks, ref, opts, labelled.classes.labels)
        release_freed_memory()
        held.append("kept", torch.zeros(0, dtype=torch.bool))  # (a bool mask, even of no beats)
        for part in segment_kept_parts(peaks, n, fs, part=context.BEAT_PART, mode=opts.mode):
            held.append("kept", part)
        with run.stage("write"), staged_dir(run.out) as stage:
            with run.stage("segment", count=False):  # each chunk's rows appended to the file as they are cut
                cut = _write_matrix_chunked(stage / "beat_matrix.npy", read, n, peaks, int(kept.sum()), fs, size, opts)
            files = {"beat_matrix.npy": stage / "beat_matrix.npy"}
            with run.stage("segment", count=False):  # quality from the rows on disk, a chunk of rows at a time
                quality_stored(held, stage / "beat_matrix.npy", fs)
            release_freed_memory()
            signal = rec.samples.cpu().numpy() if opts.figures else None
            chunking = {"samples_per_chunk": size, "chunks": -(-n // size), "seconds_per_chunk": size / fs}
            rated = (*stored_quality(held), n) if opts.figures else None  # (a figure of every beat: in memory)
            columns = (Stored(held, "quality_column"), Stored(held, "stretch_column"))
            summary = {"quality": quality_summary_stored(held, n, fs), "n_samples": n, "chunked": chunking}
            files.update(write_beats(stage, run, source, rec, signal, kept, cut, checked, opts, columns, rated=rated,
                                      labelled=labelled, **summary, **found_on))  # fmt: skip
        remove_stale(run.out, run.earlier, list(files))  # (a directory holds one run)
        # what the caller is given (9 bytes a beat), mapped from disk: in memory only where it is used
        host_peaks, host_kept = held.mapped("peaks"), held.mapped("kept")
        checked = replace(checked, host_peaks=host_peaks)
    beats = Beats(
        torch.from_numpy(np.load(run.out / "beat_matrix.npy", mmap_mode="c")),  # on disk, not in memory
        cut.lengths.new_empty(0), torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64),
        torch.from_numpy(host_kept), fs, cut.mode, cut.before, cut.length_range,
    )  # fmt: skip
    found = tuple(found_on.get("beats_found_on_leads", ()))
    result = beats_result(run, rec, n, host_peaks, beats, files, checked, found)
    return replace(result, holter=HolterSummary.from_dict(labelled.summary()))


def _lead_readers(
    run: Run, source: Any, opts: BeatsOptions
) -> tuple[list[Any], list[Callable[[int, int], torch.Tensor]], int, float]:
    """The leads a chunked run reads (chosen by run_beats where none was named: every lead named
    as an ECG lead, the beats found on all of them together and cut from the first, as in one
    piece), a ``read(start, stop)`` of each (counting what crosses to the device: chunks cross
    there alone), the recording's length and its rate."""
    leads = opts.channel if isinstance(opts.channel, list) else [opts.channel]
    readers = [
        chunk_reader(source, lead, sampling_rate=opts.sampling_rate, device=run.device, encoding=opts.encoding)
        for lead in leads
    ]
    _, n, fs = readers[0]
    return leads, [run.timer.counted(r) for r, _, _ in readers], n, fs


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
            fh.write(np.ascontiguousarray(rows).data)  # (its buffer: no copy)
    assert cut is not None  # (a recording with beats to cut: checked before)
    return cut
