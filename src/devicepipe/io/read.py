"""Reading a recording onto a device: :func:`read_series` dispatches by source and returns a :class:`Recording`.

The host only parses: a file reader (:mod:`~devicepipe.io.tables`, :mod:`~devicepipe.io.wfdb`,
or the NPY/array reader here) returns a :class:`~devicepipe.io.raw.RawSeries`, the rows are
ordered by their time column (:mod:`~devicepipe.io.timeline`), the bytes cross to the device
once, and the NaN policy runs there.

Layouts: a recording is ``(time,)`` for one channel and ``(channels, time)`` for several.
Tables (CSV, Parquet, pandas, Polars) hold channels as columns; arrays (NumPy, torch) are
taken in devicepipe's own layout, ``(time,)`` or ``(channels, time)``. An NPY file may also
hold ``(time, channels)``: a 2-D file with more rows than columns is read with its rows along
time (:func:`npy_time_first`).
"""

from __future__ import annotations

import codecs
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.core.device import resolve_device
from devicepipe.core.errors import DevicepipeError, ReadError
from devicepipe.core.interop import library_of
from devicepipe.core.units import hertz, parse_duration
from devicepipe.io.clock import index_times
from devicepipe.io.formats import ReadRequest, Span, format_of, known_formats
from devicepipe.io.formats.npy import from_array, npy_error, npy_time_first
from devicepipe.io.raw import ColumnSpec, RawSeries
from devicepipe.io.tables import (
    read_frame,
)
from devicepipe.io.timeline import (
    DUPLICATE_POLICIES,
    NAN_POLICIES,
    DuplicatePolicy,
    NanPolicy,
    TimeReport,
    apply_nan_policy,
    order_by_time,
)

__all__ = [
    "Recording",
    "Span",
    "check_rate",
    "declares_sampling_rate",
    "header_sampling_rate",
    "input_fingerprint",
    "npy_error",
    "npy_time_first",
    "read_series",
    "recording_files",
]


@dataclass(frozen=True)
class Recording:
    """Samples on a device plus what the source said about them.

    Attributes
    ----------
    samples : Tensor of shape ``(time,)`` or ``(channels, time)``, on the requested device.
    sampling_rate : Hz, or None when the source does not say.
    channels : one name per channel.
    units : one unit per channel (None when unknown), e.g. ``"mV"``.
    timestamps : Tensor of shape ``(time,)``, int64 nanoseconds since the Unix epoch, on the
        same device as ``samples``; None for sources without a time column.
    time_report : how the time column looked before sorting (None without one).
    n_nan : non-finite values (NaN, inf, numbers beyond float32) found in the source, before the policy.
    nan_policy : the policy that handled them.
    source : a description of where the samples came from.
    """

    samples: torch.Tensor
    sampling_rate: float | None
    channels: tuple[str, ...]
    units: tuple[str | None, ...]
    timestamps: torch.Tensor | None = None
    time_report: TimeReport | None = None
    n_nan: int = 0
    nan_policy: str = "error"
    source: str = ""
    start_sample: int = 0  # where these samples begin in the source (read_series(start=...))
    stated_rate: float | None = None  # the source's own rate (Hz), where another was used (override_rate=True)

    @property
    def device(self) -> torch.device:
        return self.samples.device

    @property
    def n_samples(self) -> int:
        return int(self.samples.shape[-1])

    @property
    def n_channels(self) -> int:
        return 1 if self.samples.ndim == 1 else int(self.samples.shape[0])

    @property
    def fs(self) -> float:
        """The sampling rate in Hz; a clear error where the source did not say it (where a
        recording's rate is needed, the reader or the pipeline has asked for it already)."""
        if self.sampling_rate is None:
            raise ReadError(
                f"the sampling rate of {self.source} is unknown",
                fix="pass {sampling_rate=HZ}.",
                param="sampling_rate",
            )
        return float(self.sampling_rate)

    @property
    def duration_s(self) -> float | None:
        """Length in seconds (from the sampling rate, or the time column's span)."""
        if self.sampling_rate:
            return self.n_samples / self.sampling_rate
        if self.timestamps is not None and self.n_samples > 1:
            return float(self.timestamps[-1] - self.timestamps[0]) / 1e9
        return None

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable summary: shape, device, rate, duration, NaNs, per-channel statistics
        (min, max, mean, standard deviation, computed in float64 on the device), the time report."""
        x64 = (self.samples if self.samples.ndim == 2 else self.samples.unsqueeze(0)).to(torch.float64)
        stats = [
            {
                "channel": name,
                "unit": self.units[i],
                "min": float(x64[i].min()),
                "max": float(x64[i].max()),
                "mean": float(x64[i].mean()),
                "std": float(x64[i].std()) if x64.shape[1] > 1 else 0.0,
            }
            for i, name in enumerate(self.channels)
        ]
        return {
            "source": self.source,
            "device": str(self.device),
            "dtype": str(self.samples.dtype).replace("torch.", ""),
            "shape": list(self.samples.shape),
            "n_samples": self.n_samples,
            "sampling_rate_hz": self.sampling_rate,
            "duration_s": self.duration_s,
            "n_nan": self.n_nan,
            "nan_policy": self.nan_policy,
            "channels": stats,
            "time": None if self.time_report is None else self.time_report.to_dict(),
        }

    def timestamps_numpy(self) -> np.ndarray | None:
        """The timestamps as a host ``numpy.datetime64[ns]`` array (a copy from the device)."""
        if self.timestamps is None:
            return None
        return self.timestamps.cpu().numpy().view("datetime64[ns]")


def read_series(
    source: Any,
    column: ColumnSpec = None,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    sampling_rate: float | None = None,
    time_column: str | int | None = None,
    time_format: str | None = None,
    channel: ColumnSpec = None,
    header: bool | None = None,
    encoding: str | None = None,
    nan: NanPolicy = "error",
    duplicates: DuplicatePolicy = "keep",
    start: int | str | None = None,
    stop: int | str | None = None,
    override_rate: bool = False,
    wall_clock: bool = False,
) -> Recording:
    """Read a recording onto ``device``.

    Parameters
    ----------
    source : path to a ``.csv``/``.tsv``, ``.parquet``, ``.npy``, ``.edf``/``.bdf`` or WFDB record (``.hea``,
        ``.dat`` or the record name without extension), or an in-memory NumPy array, torch
        tensor, PyArrow Array/ChunkedArray/Table, pandas Series/DataFrame or Polars
        Series/DataFrame.
    column : which column(s) of a table, or row(s) of a ``(channels, time)`` array, by name
        or position; None takes every column except the time column.
    device : ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a torch.device.
    dtype : floating dtype of the samples on the device.
    sampling_rate : Hz, for a source that does not state its rate. A rate that contradicts the
        one the source states is refused with one line, unless ``override_rate=True`` (or the rate
        is an :class:`OverrideRate`): then the samples are taken at ``sampling_rate`` and
        :attr:`Recording.stated_rate` keeps the source's.
    time_column : a column of timestamps; the rows are sorted by it and irregularities
        (duplicates, gaps) reported in :attr:`Recording.time_report`.
    time_format : strptime format of the time column when it is not ISO 8601 or the common forms.
    channel : WFDB channel(s) by name or index (an alias of ``column``).
    header : whether a CSV's first line holds column names; None detects it.
    encoding : a CSV's text encoding (e.g. ``"latin-1"``); None: UTF-16 by its byte-order mark, else UTF-8.
    nan : ``"error"`` (default: fail with the count and the first position), ``"drop"`` (drop
        the time points that have a NaN) or ``"interpolate"`` (linear, on the device).
    duplicates : rows sharing a timestamp: ``"keep"`` (report only), ``"first"``, ``"mean"`` or ``"error"``.
    start, stop : samples ``[start, stop)`` only: indices, or durations (``"2h"``: the rate known before
        reading); only that part is read (a CSV's rows before ``start`` are skipped unparsed).
    wall_clock : times that carry a zone or a UTC offset (``2020-03-29T03:00:00+02:00``) read as
        the wall-clock times they were written in (3 o'clock: the days and hours of a load series),
        not as instants in UTC (the default: a rate from them goes on across a change of
        daylight-saving time); see :mod:`devicepipe.io.clock`. Times without a zone are the same
        either way.

    Returns
    -------
    Recording with ``samples`` of shape ``(time,)`` (one channel) or ``(channels, time)``.
    """
    column = check_read_options(column, channel, nan, duplicates, dtype, sampling_rate)  # before any reading
    check_encoding(encoding)
    _check_stated_rate(source, column, sampling_rate, override_rate)
    target = resolve_device(device)
    span = _span(source, column, start, stop, sampling_rate)
    raw = _read_raw(source, column, time_column, time_format, header, encoding, span)
    _check_not_empty(raw, span, start)
    values, times, report = raw.values, raw.times_on(wall_clock), None
    if times is not None:
        values, times, report = order_by_time(values, times, duplicates, raw.source)

    samples = values.to(device=target, dtype=dtype) if values.device != target or values.dtype != dtype else values
    timestamps = None if times is None else torch.from_numpy(times.view(np.int64)).to(target)
    samples, timestamps, n_nan = apply_nan_policy(samples, timestamps, nan, raw.source, raw.names)

    rate = _rate(sampling_rate, raw, report, override_rate)
    if samples.shape[0] == 1 and samples.ndim == 2:
        samples = samples[0]
    return Recording(
        samples=samples,
        sampling_rate=None if rate is None else float(rate),
        channels=tuple(raw.names),
        units=tuple(raw.units),
        timestamps=timestamps,
        time_report=report,
        n_nan=n_nan,
        nan_policy=nan,
        source=raw.source,
        start_sample=span.start,
        stated_rate=raw.sampling_rate if rate != raw.sampling_rate and raw.sampling_rate is not None else None,
    )


#: Suffixes of compressed files, which are named for what they hold (``ecg.csv.gz``).
COMPRESSED_SUFFIXES = frozenset({".gz", ".bz2", ".xz", ".zst", ".zip", ".7z"})


def _check_not_empty(raw: RawSeries, span: Span, start: Any) -> None:
    if span.start and raw.n_time == 0:
        raise ReadError(f"read_series(): start={start!r} is at or past the end of {raw.source}.")
    if raw.n_time == 0:
        raise ReadError(f"read_series(): {raw.source} has no samples; check the file and the column.")


#: Rates closer than this share are one rate (a header's rounding of it).
SAME_RATE = 1e-6


class OverrideRate(float):
    """A sampling rate in Hz to read a source at even where the source states another (as
    ``override_rate=True`` says it): ``sampling_rate=OverrideRate(250)`` carries the choice
    through a pipeline, and the run's ``summary.json`` records both rates."""


def chosen_rate(given: float | None, stated: float | None, source: str, override: bool = False) -> float | None:
    """The rate to read ``source`` at (Hz): the one ``given``, else the one it ``stated``. A given
    rate that contradicts a stated one is a mistake (the help says the option is for sources
    that state none) and is refused with one line, unless ``override``."""
    if given is None:
        return stated
    override = override or isinstance(given, OverrideRate)
    if stated is not None and not override and abs(float(given) - float(stated)) > SAME_RATE * float(stated):
        raise ReadError(
            f"{source} states its sampling rate, {float(stated):g} Hz, and {{param}} {float(given):g} was given",
            fix="drop {sampling_rate}, or pass {override_rate=True} to read it at the rate given.",
            param="sampling_rate",
            value=given,
        )
    return given


def _check_stated_rate(source: Any, column: ColumnSpec, sampling_rate: float | None, override: bool) -> None:
    """Refuse a rate given against the one a file's header states, before its samples are read."""
    if isinstance(source, (str, os.PathLike)) and sampling_rate is not None:
        chosen_rate(sampling_rate, header_sampling_rate(Path(source), column), Path(source).name, override)


def _rate(
    sampling_rate: float | None, raw: RawSeries, report: TimeReport | None, override: bool = False
) -> float | None:
    """The rate given, else the source's, else one over the time column's step (Hz); checked. A
    rate given against the one a time column's timestamps show is refused as against a stated one."""
    rate = chosen_rate(sampling_rate, raw.sampling_rate, raw.source, override)
    if sampling_rate is not None and report is not None and not (override or isinstance(sampling_rate, OverrideRate)):
        _check_timed_rate(float(sampling_rate), report, raw.source)
    if rate is None and report is not None and report.step_s > 0:
        rate = 1.0 / report.step_s
    check_rate(rate, f"the sampling rate of {raw.source}")
    return rate


#: A rate given may differ this much (a share) from the one the timestamps show over their span.
TIMED_RATE_TOLERANCE = 0.02


def _check_timed_rate(given: float, report: TimeReport, source: str) -> None:
    """Refuse a rate ``given`` that the time column's timestamps contradict: the samples over its
    span (gaps filled, duplicates counted once) say another rate."""
    span = float((report.end - report.start) / np.timedelta64(1, "s"))
    steps = report.n_rows - 1 - report.n_duplicates + report.missing_steps
    if span <= 0 or steps < 1:
        return
    shown = steps / span
    if abs(shown - given) > TIMED_RATE_TOLERANCE * shown:
        raise ReadError(
            f"{source}'s timestamps show {shown:.4g} Hz ({report.n_rows:,} rows over {span:,.4g} s), and "
            f"{{param}} {given:g} was given",
            fix="drop {sampling_rate} (the timestamps give the rate), or pass {override_rate=True} to read it at "
            "the rate given.",
            param="sampling_rate",
            value=given,
        )


def check_encoding(encoding: str | None) -> None:
    """A clear error for a text encoding Python does not know (``None``: detect)."""
    if encoding is None:
        return
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise ReadError(
            f"unknown text encoding {encoding!r}",
            fix="use a Python codec name, e.g. {encoding='utf-8'}, 'latin-1' or 'utf-16' (or drop {encoding}).",
            param="encoding",
            value=encoding,
        ) from None


def check_read_options(
    column: ColumnSpec,
    channel: ColumnSpec,
    nan: str,
    duplicates: str,
    dtype: torch.dtype,
    sampling_rate: float | None,
) -> ColumnSpec:
    """The column asked for (``column`` or its alias ``channel``), once every option is checked."""
    if channel is not None and column is not None:
        raise ReadError("read_series(): pass column= or channel=, not both (they mean the same).")
    if nan not in NAN_POLICIES:
        raise ReadError(f"read_series(): nan={nan!r} is not a policy; use 'error', 'drop' or 'interpolate'.")
    if duplicates not in DUPLICATE_POLICIES:
        raise ReadError(
            f"read_series(): duplicates={duplicates!r} is not a policy; use 'keep', 'first', 'mean' or 'error'."
        )
    if not dtype.is_floating_point:
        raise ReadError(f"read_series(): dtype must be a floating type, got {dtype}.")
    check_rate(sampling_rate, "sampling_rate")
    return channel if column is None else column


def _read_raw(
    source: Any,
    column: ColumnSpec,
    time_column: str | int | None,
    time_format: str | None,
    header: bool | None,
    encoding: str | None,
    span: Span,
) -> RawSeries:
    """The ``span`` of ``source`` (a path or an object in memory) as read, before any policy."""
    if isinstance(source, (str, os.PathLike)):
        return _read_path(Path(source), column, time_column, time_format, header, encoding, span)
    raw = _read_object(source, column, time_column)
    return RawSeries(
        raw.values[:, span.start : span.stop],
        raw.names,
        raw.units,
        raw.sampling_rate,
        None if raw.times is None else raw.times[span.start : span.stop],
        raw.source,
        None if raw.wall_times is None else raw.wall_times[span.start : span.stop],
    )


def _span(source: Any, column: ColumnSpec, start: Any, stop: Any, sampling_rate: float | None) -> Span:
    """``start``/``stop`` as sample indices; durations need the rate before reading."""
    if start is None and stop is None:
        return Span()
    rate = sampling_rate
    needs_rate = isinstance(start, str) or isinstance(stop, str)
    if needs_rate and rate is None and isinstance(source, (str, os.PathLike)):
        rate = header_sampling_rate(Path(source), column)
    bounds: list[int | None] = []
    for name, value in (("start", start), ("stop", stop)):
        if value is None:
            bounds.append(None)
        elif isinstance(value, str):
            if rate is None:
                raise ReadError(
                    f"read_series(): {name}={value!r} is a duration, and the rate is not known before reading; "
                    f"pass sampling_rate=, or {name} as a sample index."
                )
            bounds.append(int(round(parse_duration(value) * rate)))
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
            bounds.append(int(value))
        else:
            raise ReadError(
                f"read_series(): {name} must be a sample index (>= 0) or a duration like '10min', got {value!r}."
            )
    first, last = bounds[0] or 0, bounds[1]
    if last is not None and last <= first:
        raise ReadError(f"read_series(): stop={stop!r} must come after start={start!r}.")
    return Span(first, last)


def header_sampling_rate(path: Path, column: ColumnSpec = None) -> float | None:
    """The sampling rate a file's header states (WFDB, EDF, devicepipe's Parquet), read without its samples."""
    fmt = format_of(path)
    return None if fmt is None else fmt.sampling_rate(path, column)


def check_rate(rate: Any, what: str = "sampling_rate") -> None:
    """A clear error unless ``rate`` is None or a finite, positive number of Hz (``what``: the
    rate's name in the message; ``"sampling_rate"`` is the one a user passed)."""
    if rate is None:
        return
    try:
        hertz(rate, "read_series()")  # (the test every function given a rate makes)
    except DevicepipeError:
        given = what == "sampling_rate"
        raise ReadError(
            f"read_series(): {'{param}' if given else what} must be a finite, positive number of Hz, got {rate!r}"
            + ("." if given else ""),
            fix=None if given else "pass {sampling_rate=HZ} yourself.",
            param="sampling_rate",
            value=rate,
        ) from None


def recording_files(path: Path) -> list[Path]:
    """The files that hold the recording ``path`` names: a WFDB record's header and signal
    file, else the file itself (whether or not they exist)."""
    fmt = format_of(path)
    return [path] if fmt is None else fmt.files(path)


def input_fingerprint(source: Any) -> str | None:
    """SHA-256 of the files a path names (a WFDB record: its header and signal file), to tell
    later whether a run is given the same recording; None for in-memory sources."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    files = recording_files(Path(source))
    digest = hashlib.sha256()
    found = False
    for file in files:
        if file.is_file():
            found = True
            with file.open("rb") as fh:
                while chunk := fh.read(1 << 22):
                    digest.update(chunk)
    return digest.hexdigest() if found else None


def declares_sampling_rate(source: Any) -> bool | None:
    """Whether a source says its sampling rate, found without reading its samples.

    True for a WFDB record and a Parquet file that devicepipe wrote with one; False for
    CSV/TSV and NPY files (and Parquet without it); None for in-memory objects and anything
    else (only reading tells). A CSV read with a time column gets its rate from the times.
    """
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = Path(source)
    fmt = format_of(path)
    return None if fmt is None else fmt.declares_rate(path)


def _read_path(
    path: Path,
    column: ColumnSpec,
    time_column: str | int | None,
    time_format: str | None,
    header: bool | None,
    encoding: str | None,
    span: Span,
) -> RawSeries:
    fmt = format_of(path)
    if fmt is None or not fmt.names_records:
        if not path.exists():
            raise ReadError(f"read_series(): file not found: {path}.")
        if path.is_dir():
            raise ReadError(f"read_series(): {path} is a directory; pass a file.")
    if fmt is None and path.suffix.lower() in COMPRESSED_SUFFIXES:
        raise ReadError(
            f"read_series(): {path.name} is compressed ({path.suffix.lower()}); decompress it first (devicepipe "
            f"reads {known_formats()}, not compressed files)."
        )
    if fmt is None:
        raise ReadError(
            f"read_series(): unknown format {path.suffix.lower() or '(no extension)'!r} of {path.name}; "
            f"use {known_formats()}."
        )
    return fmt.read(path, ReadRequest(column, time_column, time_format, header, encoding, span))


def _read_object(obj: Any, column: ColumnSpec, time_column: str | int | None) -> RawSeries:
    lib = library_of(obj)
    kind = type(obj).__name__
    if lib in ("pandas", "polars") and kind == "DataFrame" or lib == "pyarrow" and kind == "Table":
        return read_frame(obj, lib, column, time_column)
    if time_column is not None:
        raise ReadError(f"read_series(): time_column= needs a table (DataFrame or Table), got a {lib} {kind}.")
    if lib == "pandas" and kind == "Series":
        raw = from_array(obj, column, "pandas Series")
        name = str(obj.name) if obj.name is not None else "ch0"
        times, wall = index_times(obj, "pandas Series") or (None, None)
        return RawSeries(raw.values, [name], [None], None, times, "pandas Series", wall)
    if lib == "polars" and kind == "Series":
        raw = from_array(obj, column, "Polars Series")
        return RawSeries(raw.values, [obj.name or "ch0"], [None], None, None, "Polars Series")
    return from_array(obj, column, f"{lib} {kind}")
