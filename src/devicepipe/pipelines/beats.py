"""``run_beats``: an ECG's heartbeats found, cut into a fixed-width matrix and written, for one
recording or a batch of them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from devicepipe.core.device import resolve_device
from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import (
    ecg_peaks,
)
from devicepipe.ecg.segment import SegmentMode
from devicepipe.io import (
    Recording,
    ReferenceBeats,
    read_reference,
)
from devicepipe.io.read import header_sampling_rate, read_series
from devicepipe.io.timeline import NanPolicy
from devicepipe.io.write import holds_output
from devicepipe.pipelines.beats_finish import BeatsOptions, finish_beats
from devicepipe.pipelines.chunked import chunk_size, run_beats_chunked
from devicepipe.pipelines.context import BEATS_MODE, PEAK_METHOD, Progress, Run, start
from devicepipe.pipelines.reading import ALL_LEADS, check_ecg_input, find_peaks, read_ecg, signal_choice
from devicepipe.pipelines.results import BeatsResult


@holds_output
def run_beats(
    source: Any,
    out: str | Path,
    *,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    method: str = PEAK_METHOD,
    mode: SegmentMode = BEATS_MODE,
    device: str | torch.device = "auto",
    reference: str | Path | None = None,
    nan: NanPolicy = "error",
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
    run = start(out, device, count_transfers, progress)
    ref = None if reference is None else read_reference(reference)  # checked before the recording is read
    chosen, time_column = choice = signal_choice(run, source, channel)  # (the chunk size may need its rate)
    opts = BeatsOptions(
        chosen, sampling_rate, method, mode, nan, encoding, figures, strict, count_transfers, chunk, memory_budget
    )
    if chunk is not None:
        _check_rate_for_chunks(source, chosen, time_column, sampling_rate)
    size = chunk_size(source, opts, run.device)
    if size is not None:
        _check_rate_for_chunks(source, chosen, time_column, sampling_rate)
        if chosen == ALL_LEADS:
            raise DevicepipeError(
                "--channel all finds beats on every channel in one piece, and this recording is read in chunks "
                "(--chunk, or beyond --memory-budget); drop --channel (every lead named as an ECG lead is read, "
                "in chunks too), pick one (--channel 0), or raise --memory-budget."
            )
        return run_beats_chunked(run, source, ref, opts, size)
    rec = read_ecg(run, source, choice, sampling_rate, nan, encoding)
    run.note(f"finding beats in {rec.n_samples:,} samples at {rec.sampling_rate:g} Hz on {run.device}")
    with run.stage("detect"):
        peaks = find_peaks(rec, method, chosen)
    return finish_beats(run, source, rec, peaks, ref, opts)


#: Rows whose timestamps a recording read in chunks without a rate is probed with, for the error's fix.
TIME_PROBE_ROWS = 10_000


def _check_rate_for_chunks(source: Any, channel: Any, time_column: str | None, sampling_rate: float | None) -> None:
    """Refuse, in one line, a table whose rate only its time column gives, to be read in chunks:
    the chunks cannot check the timestamps of the whole (their order, gaps and rate), so the
    rate must be given; the fix names the rate its first timestamps show. A rate given that
    those timestamps contradict is refused too."""
    if time_column is None or not isinstance(source, (str, Path)):
        return
    first = channel[0] if isinstance(channel, list) else channel
    if header_sampling_rate(Path(source), None if first == ALL_LEADS else first) is not None:
        return
    head = read_series(  # (a rate given that the first timestamps contradict is refused here, as in one piece)
        source, None if first == ALL_LEADS else first, time_column=time_column, stop=TIME_PROBE_ROWS,
        sampling_rate=sampling_rate,
    )  # fmt: skip
    if sampling_rate is not None:
        return
    shown = (
        ""
        if head.sampling_rate is None
        else f" (its first {head.n_samples:,} timestamps say {head.sampling_rate:g} Hz)"
    )
    raise DevicepipeError(
        f"{Path(source).name} is read in chunks, and its rate is in its time column {time_column!r} alone{shown}: "
        "chunks cannot check the timestamps of the whole recording",
        fix="pass {sampling_rate} (the rate of its samples), or read it in one piece: drop {chunk} "
        "(and {memory_budget}).",
        param="sampling_rate",
    )


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
    ready: dict[int, tuple[Run, Recording, ReferenceBeats | None]] = {}
    for i, (source, out) in enumerate(zip(sources, outs, strict=True)):
        try:
            run = start(out, dev, opts.count_transfers, None)
            named = refs[i]
            ref = None if named is None else read_reference(named)
            rec = read_ecg(run, source, signal_choice(run, source, opts.channel), opts.sampling_rate, opts.nan,
                           opts.encoding)  # fmt: skip
            check_ecg_input(rec, opts.channel)
            ready[i] = (run, rec, ref)
        except DevicepipeError as exc:
            results[i] = exc
    groups: dict[tuple[tuple[int, ...], float, torch.dtype], list[int]] = {}
    for i, (_, rec, _) in ready.items():
        groups.setdefault((tuple(rec.samples.shape), rec.fs, rec.samples.dtype), []).append(i)
    for (shape, fs, _), members in groups.items():
        fuse = opts.channel == ALL_LEADS or len(shape) == 2  # asked for, or the leads chosen
        runs = [ready[i][0] for i in members]
        stacked = torch.stack([ready[i][1].samples for i in members]) if len(members) > 1 else None
        started = runs[0].timer.seconds.get("detect", 0.0)
        with runs[0].stage("detect"):
            found: list[torch.Tensor] | torch.Tensor
            if stacked is None:
                found = [find_peaks(ready[members[0]][1], opts.method, opts.channel)]
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
                results[i] = finish_beats(run, sources[i], rec, peaks, ref, opts)
            except DevicepipeError as exc:
                results[i] = exc
    return [r if r is not None else DevicepipeError("not run") for r in results]
