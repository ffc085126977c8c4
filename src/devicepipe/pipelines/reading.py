"""Reading an ECG onto the device and finding and cutting its beats: the first stages of every
ECG pipeline."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import format_duration
from devicepipe.ecg import (
    Beats,
    check_ecg,
    ecg_peaks,
    ecg_segment,
)
from devicepipe.ecg.segment import SegmentMode
from devicepipe.io import (
    Recording,
    read_series,
)
from devicepipe.io.channels import axis_rates, choose_signal
from devicepipe.io.read import declares_sampling_rate
from devicepipe.io.timeline import NanPolicy
from devicepipe.pipelines.checks import MIN_ECG_HZ
from devicepipe.pipelines.context import Run


def unknown_rate(source: Any) -> DevicepipeError:
    """The error of a recording whose rate nothing gives; where a table's column of times in
    numbers says what it may be (:func:`~devicepipe.io.channels.axis_rates`), the fix names it."""
    name = Path(source).name if isinstance(source, (str, os.PathLike)) else str(source)
    problem = f"the sampling rate of {name} is unknown"
    column, step, rates = axis_rates(source, lowest=MIN_ECG_HZ)
    if not rates:
        return DevicepipeError(
            problem, fix="pass {sampling_rate=HZ} (e.g. {sampling_rate=250}).", param="sampling_rate"
        )
    problem += f" (its column {column!r} rises by {step:g} a row; it is not read as times)"
    fix = " or ".join(f"{{sampling_rate={rate:g}}} if those are {unit}" for unit, rate in rates)
    return DevicepipeError(problem, fix=f"pass {fix}.", param="sampling_rate")


def read_ecg(
    run: Run,
    source: Any,
    chosen: Chosen,
    sampling_rate: float | None,
    nan: NanPolicy,
    encoding: str | None,
) -> Recording:
    """Read the ECG channel or leads :func:`signal_choice` ``chosen`` (the file looked at once)
    onto the run's device; ``nan`` (the policy for non-finite samples) and ``encoding`` (a CSV's)
    as :func:`devicepipe.io.read_series` takes them. With no rate given or stated by the file,
    the rate is that of the chosen time column's timestamps (a table's)."""
    channel, time_column = chosen
    timed = declares_sampling_rate(source) is False  # (then a time column is read, to give the rate or check it)
    times = sampling_rate is None and timed
    if times and time_column is None and Path(source).exists():  # (a missing file: read_series says so)
        raise unknown_rate(source)  # said before a long read, not after
    with run.stage("read"):
        rec = read_series(
            source,
            None if channel == ALL_LEADS else channel,
            device=run.device,
            sampling_rate=sampling_rate,
            time_column=time_column if timed else None,
            nan=nan,
            encoding=encoding,
        )
    if rec.sampling_rate is None:
        raise unknown_rate(rec.source)
    if rec.sampling_rate < 1:  # (a heart beats about once a second: slower samples see no beat)
        raise DevicepipeError(
            f"{rec.source} holds a sample every {format_duration(1 / rec.sampling_rate)} ({rec.sampling_rate:g} Hz), "
            "too few to see a heartbeat",
            fix="is it a load series (devicepipe series)? Else is {sampling_rate} right (ECGs: 100 Hz or more)?",
            param="sampling_rate",
        )
    _refuse_times_that_go_back(rec, time_column)
    return rec


def _refuse_times_that_go_back(rec: Recording, time_column: str | None) -> None:
    """Refuse, in one line, an ECG whose time column goes back into times it has held: a clock
    set back (daylight-saving time ending, in local times) or recordings joined. Sorted by time,
    the samples of the stretches that share times would interleave, a signal no heart made (on a
    simulated ECG with a minute of its times repeated, a third of its beats were called V). Rows
    merely out of order, which sort into a regular series, are sorted as before."""
    report = rec.time_report
    if report is None or report.overlap is None:
        return
    problem = (
        f"the times in column {time_column!r} of {rec.source} go back into times they have held, first "
        f"{report.overlap_text()}: a clock set back (daylight-saving time ending) or recordings joined, "
        "whose samples would interleave if sorted by time"
    )
    raise DevicepipeError(
        problem, fix="write its times in UTC (or with their UTC offsets), or split it where the times go back."
    )


def no_beats(rec: Recording, peaks: torch.Tensor) -> DevicepipeError:
    """The error of a recording from which no whole beat was cut (a model needs beats)."""
    problem = f"no whole beat was cut from {rec.source} ({int(peaks.numel())} R peaks found)"
    return DevicepipeError(
        problem,
        fix="is it an ECG, and is {sampling_rate} right?",
        param="sampling_rate",
    )


class Chosen(NamedTuple):
    """What an ECG pipeline reads of a recording: the channel (a name or index, the list of its
    ECG leads, or :data:`ALL_LEADS`) and a table's column of timestamps (None: none)."""

    channel: str | int | list[str]
    time_column: str | None


def signal_choice(run: Run, source: Any, channel: str | int | list[str] | None) -> Chosen:
    """The channel to read (``channel`` where named, else :func:`~devicepipe.io.channels.choose_signal`'s,
    saying which channels were passed over) and a table's column of timestamps (or None), wherever
    it is and whichever channel is read.
    Where none is named and the recording has two or more leads named as ECG leads, the channel
    is the list of them: its beats are found on all of them together (as with :data:`ALL_LEADS`)."""
    choice = choose_signal(source)
    if channel is not None:  # (the table's timestamps give the rate, or check the rate given, all the same)
        return Chosen(channel, choice.time_column)
    if choice.passed:
        names = ", ".join(repr(name) for name in choice.passed)
        run.note(f"reading {choice.channel!r}, past {names} (an axis, or not named as an ECG); --channel picks another")
    if len(choice.leads) > 1:
        run.note(f"finding beats on leads {', '.join(choice.leads)} together; --channel picks one")
        return Chosen(list(choice.leads), choice.time_column)
    return Chosen(choice.channel, choice.time_column)


#: ``channel`` value that finds one set of beats from every lead (``ecg_peaks(..., leads="fuse")``).
ALL_LEADS = "all"


def find_peaks(rec: Recording, method: str, channel: str | int | list[str] | None) -> torch.Tensor:
    """The R peaks of a recording: of its one channel, or of all its leads together where it holds
    several (``channel="all"``, or the leads :func:`signal_choice` chose)."""
    if channel == ALL_LEADS or rec.samples.ndim == 2:
        leads = rec.samples if rec.samples.ndim == 2 else rec.samples[None]
        peaks = ecg_peaks(leads, rec.fs, method=method, leads="fuse")
    else:
        peaks = ecg_peaks(rec.samples, rec.fs, method=method)
    assert isinstance(peaks, torch.Tensor)  # (one recording's)
    return peaks


def first_lead(rec: Recording) -> tuple[Recording, dict[str, Any]]:
    """A recording of all leads reduced to its first (beats are cut from it), and the summary
    fields that say the beats were found on every lead; a one-channel recording as it is."""
    if rec.samples.ndim == 1:
        return rec, {}
    first = replace(rec, samples=rec.samples[0], channels=rec.channels[:1], units=rec.units[:1])
    return first, {"beats_found_on_leads": list(rec.channels)}


def read_and_cut(
    run: Run,
    source: Any,
    channel: str | int | None,
    sampling_rate: float | None,
    method: str,
    mode: SegmentMode,
    nan: NanPolicy,
    encoding: str | None,
) -> tuple[Recording, Recording, torch.Tensor, Beats, dict[str, Any]]:
    """Read one ECG channel onto the run's device (:func:`read_ecg`), find its beats (on all
    leads with ``channel="all"`` or where it has several, then cut from the first), cut them;
    with the summary fields that say which leads the beats were found on (:func:`first_lead`).
    Returns the recording as read (every lead, for the classes), its first lead, the R peaks,
    the beats and those fields."""
    rec = read_ecg(run, source, signal_choice(run, source, channel), sampling_rate, nan, encoding)
    run.note(f"finding beats in {rec.n_samples:,} samples at {rec.sampling_rate:g} Hz on {run.device}")
    with run.stage("detect"):
        peaks = find_peaks(rec, method, channel)
    every = rec
    rec, leads = first_lead(rec)
    if leads:
        run.note(f"beats found on all {len(leads['beats_found_on_leads'])} leads together, cut from {rec.channels[0]}")
    with run.stage("segment"):
        beats = ecg_segment(rec.samples, peaks, rec.fs, mode=mode)
    return every, rec, peaks, beats, leads


def check_ecg_input(rec: Recording, channel: str | int | list[str] | None = None) -> None:
    """The checks :func:`ecg_peaks` makes, made on one recording before it joins a batch (so one
    bad recording is refused alone, not with its batch); with ``channel="all"``, on each lead."""
    if rec.samples.ndim != 1 and channel != ALL_LEADS and channel is not None and not isinstance(channel, list):
        raise DevicepipeError(f"{rec.source}: expected one channel, got shape {tuple(rec.samples.shape)}.")
    check_ecg(rec.samples, rec.fs)
