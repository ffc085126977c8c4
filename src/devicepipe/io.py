"""Read recordings onto a device; write outputs atomically.

:func:`read_series` reads a CSV, Parquet, NPY or WFDB file, or takes an in-memory array, and
returns a :class:`Recording` whose samples already sit on the requested device. The host
only parses: PyArrow reads just the requested columns straight to float32, the bytes cross
to the device once, and the NaN policy runs there.

Layouts: a recording is ``(time,)`` for one channel and ``(channels, time)`` for several.
Tables (CSV, Parquet, pandas, Polars) hold channels as columns; arrays (NPY files, NumPy,
torch) are taken in devicepipe's own layout, ``(time,)`` or ``(channels, time)``.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from devicepipe.device import resolve_device
from devicepipe.errors import ReadError
from devicepipe.interop import library_of, to_torch

__all__ = [
    "Recording",
    "TimeReport",
    "read_series",
    "atomic_path",
    "write_parquet",
    "write_csv",
    "write_npy",
    "write_json",
    "SAMPLING_RATE_KEY",
    "BEAT_SYMBOLS",
    "BeatAnnotations",
    "read_beat_annotations",
    "staged_dir",
    "check_output_dir",
]

NanPolicy = Literal["error", "drop", "interpolate"]
DuplicatePolicy = Literal["keep", "first", "mean", "error"]
ColumnSpec = str | int | Sequence[str | int] | None

#: Parquet schema-metadata key under which devicepipe stores a recording's sampling rate (Hz).
SAMPLING_RATE_KEY = b"devicepipe.sampling_rate"

_CSV_SUFFIXES = {".csv": ",", ".tsv": "\t"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
_WFDB_SUFFIXES = {".hea", ".dat", ".atr"}
_TIME_PARSERS = ("%m/%d/%Y %H:%M", "%m/%d/%Y %H:%M:%S", "%Y-%m-%d %H:%M", "%d.%m.%Y %H:%M")
_NUMBER = r"^\s*[-+]?((\d+\.?\d*)|(\.\d+))([eE][-+]?\d+)?\s*$|^\s*[-+]?(nan|NaN|NAN|inf|Inf|INF)\s*$"


@dataclass(frozen=True)
class TimeReport:
    """What a time column looked like before it was sorted.

    Times are ``numpy.datetime64[ns]``; ``step_s`` is the median interval in seconds.
    """

    n_rows: int
    start: np.datetime64
    end: np.datetime64
    step_s: float
    was_sorted: bool
    n_duplicates: int  # rows whose timestamp equals the previous row's, after sorting
    duplicates: tuple[np.datetime64, ...]  # the first few duplicated timestamps
    n_gaps: int  # intervals longer than 1.5 steps
    gaps: tuple[tuple[np.datetime64, np.datetime64, int], ...]  # (before, after, missing steps)
    missing_steps: int  # samples the gaps would hold on the regular grid
    duplicates_policy: str = "keep"

    @property
    def regular(self) -> bool:
        """True when the series is sorted, without duplicates and without gaps."""
        return self.was_sorted and self.n_duplicates == 0 and self.n_gaps == 0

    def summary(self) -> str:
        """One line describing the irregularities (or their absence)."""
        parts = [f"{self.n_rows} rows from {self.start} to {self.end}, step {self.step_s:g} s"]
        if not self.was_sorted:
            parts.append("was not sorted (sorted now)")
        if self.n_duplicates:
            parts.append(f"{self.n_duplicates} duplicate timestamp(s) ({self.duplicates_policy})")
        if self.n_gaps:
            parts.append(f"{self.n_gaps} gap(s) missing {self.missing_steps} step(s) in all")
        if self.regular:
            parts.append("regular")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (times as ISO strings)."""
        return {
            "n_rows": self.n_rows,
            "start": str(self.start),
            "end": str(self.end),
            "step_s": self.step_s,
            "was_sorted": self.was_sorted,
            "n_duplicates": self.n_duplicates,
            "duplicates": [str(t) for t in self.duplicates],
            "duplicates_policy": self.duplicates_policy,
            "n_gaps": self.n_gaps,
            "gaps": [[str(a), str(b), n] for a, b, n in self.gaps],
            "missing_steps": self.missing_steps,
        }


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
    n_nan : NaN values found in the source (before the NaN policy).
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
    extra: dict[str, Any] = field(default_factory=dict)

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
    def duration_s(self) -> float | None:
        """Length in seconds (from the sampling rate, or the time column's span)."""
        if self.sampling_rate:
            return self.n_samples / self.sampling_rate
        if self.timestamps is not None and self.n_samples > 1:
            return float(self.timestamps[-1] - self.timestamps[0]) / 1e9
        return None

    def timestamps_numpy(self) -> np.ndarray | None:
        """The timestamps as a host ``numpy.datetime64[ns]`` array (a copy from the device)."""
        if self.timestamps is None:
            return None
        return self.timestamps.cpu().numpy().view("datetime64[ns]")

    def channel(self, name_or_index: str | int) -> torch.Tensor:
        """One channel's samples, shape ``(time,)``."""
        index = _resolve_names([name_or_index], list(self.channels), "channel", self.source)[0]
        return self.samples if self.samples.ndim == 1 else self.samples[index]


# ----------------------------------------------------------------------------- reading


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
    nan: NanPolicy = "error",
    duplicates: DuplicatePolicy = "keep",
) -> Recording:
    """Read a recording onto ``device``.

    Parameters
    ----------
    source : path to a ``.csv``/``.tsv``, ``.parquet``, ``.npy`` or WFDB record (``.hea``,
        ``.dat`` or the record name without extension), or an in-memory NumPy array, torch
        tensor, PyArrow Array/ChunkedArray/Table, pandas Series/DataFrame or Polars
        Series/DataFrame.
    column : which column(s) of a table, or row(s) of a ``(channels, time)`` array, by name
        or position; None takes every column except the time column.
    device : ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a torch.device.
    dtype : floating dtype of the samples on the device.
    sampling_rate : Hz; overrides (or supplies) the source's rate.
    time_column : a column of timestamps; the rows are sorted by it and irregularities
        (duplicates, gaps) reported in :attr:`Recording.time_report`.
    time_format : strptime format of the time column when it is not ISO 8601 or one of the
        common formats tried by default.
    channel : WFDB channel(s) by name or index (an alias of ``column``).
    header : whether a CSV's first line holds column names; None detects it.
    nan : ``"error"`` (default: fail with the count and the first position), ``"drop"`` (drop
        the time points that have a NaN) or ``"interpolate"`` (linear, on the device).
    duplicates : with a time column, what to do with rows sharing a timestamp: ``"keep"``
        (report only), ``"first"``, ``"mean"`` or ``"error"``.

    Returns
    -------
    Recording with ``samples`` of shape ``(time,)`` (one channel) or ``(channels, time)``.
    """
    if channel is not None and column is not None:
        raise ReadError("read_series(): pass column= or channel=, not both (they mean the same).")
    column = channel if column is None else column
    if nan not in ("error", "drop", "interpolate"):
        raise ReadError(f"read_series(): nan={nan!r} is not a policy; use 'error', 'drop' or 'interpolate'.")
    if duplicates not in ("keep", "first", "mean", "error"):
        raise ReadError(
            f"read_series(): duplicates={duplicates!r} is not a policy; use 'keep', 'first', 'mean' or 'error'."
        )
    if not dtype.is_floating_point:
        raise ReadError(f"read_series(): dtype must be a floating type, got {dtype}.")
    target = resolve_device(device)

    if isinstance(source, (str, os.PathLike)):
        raw = _read_path(Path(source), column, time_column, time_format, header)
    else:
        raw = _read_object(source, column, time_column)

    values, times, report = raw.values, raw.times, None
    if raw.n_time == 0:
        raise ReadError(f"read_series(): {raw.source} has no samples; check the file and the column.")
    if times is not None:
        values, times, report = _order_by_time(values, times, duplicates, raw.source)

    samples = values.to(device=target, dtype=dtype) if values.device != target or values.dtype != dtype else values
    timestamps = None if times is None else torch.from_numpy(times.view(np.int64)).to(target)
    samples, timestamps, n_nan = _apply_nan_policy(samples, timestamps, nan, raw.source)

    rate = sampling_rate if sampling_rate is not None else raw.sampling_rate
    if rate is None and report is not None and report.step_s > 0:
        rate = 1.0 / report.step_s
    if rate is not None and not rate > 0:
        raise ReadError(f"read_series(): sampling_rate must be positive, got {rate}.")
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
    )


@dataclass
class _Raw:
    """Host-side result of a reader: values ``(channels, time)`` as a tensor (CPU or device)."""

    values: torch.Tensor
    names: list[str]
    units: list[str | None]
    sampling_rate: float | None
    times: np.ndarray | None  # datetime64[ns], (time,)
    source: str

    @property
    def n_time(self) -> int:
        return int(self.values.shape[-1])


def _read_path(path: Path, column: ColumnSpec, time_column: Any, time_format: str | None, header: bool | None) -> _Raw:
    suffix = path.suffix.lower()
    if suffix in _WFDB_SUFFIXES or (not path.exists() and path.with_name(path.name + ".hea").exists()):
        return _read_wfdb(path, column)
    if not path.exists():
        raise ReadError(f"read_series(): file not found: {path}.")
    if path.is_dir():
        raise ReadError(f"read_series(): {path} is a directory; pass a file.")
    if suffix in _CSV_SUFFIXES:
        return _read_csv(path, column, time_column, time_format, header, _CSV_SUFFIXES[suffix])
    if suffix in _PARQUET_SUFFIXES:
        return _read_parquet(path, column, time_column)
    if suffix == ".npy":
        if time_column is not None:
            raise ReadError(f"read_series(): {path.name} is an array file and has no time column.")
        return _read_npy(path, column)
    raise ReadError(
        f"read_series(): unknown format {suffix or '(no extension)'!r} of {path.name}; "
        "use .csv, .tsv, .parquet, .npy or a WFDB record (.hea/.dat)."
    )


def _resolve_names(wanted: Sequence[str | int], names: list[str], what: str, source: str) -> list[int]:
    indices = []
    for item in wanted:
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not -len(names) <= item < len(names):
                raise ReadError(
                    f"read_series(): {what} {item} is out of range in {source}; there are {len(names)}: {names}."
                )
            indices.append(int(item) % len(names))
        elif item in names:
            indices.append(names.index(item))
        else:
            raise ReadError(f"read_series(): {what} {item!r} not found in {source}; {what}s are {names}.")
    return indices


def _as_list(column: ColumnSpec) -> list[str | int] | None:
    if column is None:
        return None
    if isinstance(column, (str, int, np.integer)):
        return [column]
    return list(column)


def _pick_columns(names: list[str], column: ColumnSpec, time_column: Any, source: str) -> tuple[list[str], str | None]:
    """Return the value columns and the time column's name."""
    time_name = None
    if time_column is not None:
        time_name = names[_resolve_names([time_column], names, "column", source)[0]]
    wanted = _as_list(column)
    if wanted is None:
        chosen = [n for n in names if n != time_name]
        if not chosen:
            raise ReadError(f"read_series(): {source} has no value column besides the time column.")
    else:
        chosen = [names[i] for i in _resolve_names(wanted, names, "column", source)]
        if time_name in chosen:
            raise ReadError(f"read_series(): column {time_name!r} is the time column; choose a value column.")
    return chosen, time_name


def _looks_numeric(fields: list[str]) -> bool:
    for f in fields:
        try:
            float(f)
        except ValueError:
            return False
    return True


def _read_csv(
    path: Path, column: ColumnSpec, time_column: Any, time_format: str | None, header: bool | None, delimiter: str
) -> _Raw:
    import pyarrow.csv as pacsv  # noqa: PLC0415

    source = path.name
    with path.open(newline="", encoding="utf-8", errors="replace") as fh:
        first = next(csv.reader(fh, delimiter=delimiter), None)
    if not first:
        raise ReadError(f"read_series(): {source} is empty; a CSV needs at least one row of numbers.")
    if header is None:
        header = not _looks_numeric(first)
    names = [f.strip() for f in first] if header else [f"f{i}" for i in range(len(first))]
    chosen, time_name = _pick_columns(names, column, time_column, source)

    types: dict[str, pa.DataType] = {n: pa.float32() for n in chosen}
    if time_name is not None:
        types[time_name] = pa.timestamp("ns")
    parsers = [time_format] if time_format else [pacsv.ISO8601, *_TIME_PARSERS]
    read_opts = pacsv.ReadOptions(column_names=None if header else names, autogenerate_column_names=False)
    convert = pacsv.ConvertOptions(
        include_columns=[*chosen, *([time_name] if time_name else [])],
        column_types=types,
        timestamp_parsers=parsers,
    )
    try:
        table = pacsv.read_csv(
            path, read_options=read_opts, parse_options=pacsv.ParseOptions(delimiter=delimiter), convert_options=convert
        )
    except pa.ArrowInvalid as exc:
        raise ReadError(_explain_csv_error(path, exc, chosen, time_name, names, header, delimiter)) from None
    times = None
    if time_name is not None:
        col = table.column(time_name)
        if col.null_count:
            raise ReadError(
                f"read_series(): time column {time_name!r} of {source} has {col.null_count} empty value(s)."
            )
        times = col.to_numpy().astype("datetime64[ns]")
    return _Raw(_stack_columns(table, chosen), chosen, [None] * len(chosen), None, times, source)


def _explain_csv_error(
    path: Path, exc: Exception, chosen: list[str], time_name: str | None, names: list[str], header: bool, delimiter: str
) -> str:
    """Find the first offending value (its line number and text) for a one-line error."""
    import pyarrow.csv as pacsv  # noqa: PLC0415

    message = str(exc)
    read_opts = pacsv.ReadOptions(column_names=None if header else names)
    as_text = pacsv.ConvertOptions(
        include_columns=[*chosen, *([time_name] if time_name else [])],
        column_types={n: pa.string() for n in [*chosen, *([time_name] if time_name else [])]},
    )
    try:
        table = pacsv.read_csv(
            path, read_options=read_opts, parse_options=pacsv.ParseOptions(delimiter=delimiter), convert_options=as_text
        )
    except pa.ArrowInvalid:
        return f"read_series(): cannot parse {path.name}: {message}."
    if time_name is not None:
        times = table.column(time_name)
        if (
            times.null_count < len(times)
            and pc.all(pc.or_(pc.is_null(times), pc.match_substring_regex(times, _NUMBER))).as_py()
        ):
            return (
                f"read_series(): time column {time_name!r} of {path.name} holds numbers, not times; "
                "pass the timestamp column as the time column (e.g. --time-column Datetime)."
            )
    for name in chosen:
        col = table.column(name)
        ok = pc.or_(pc.is_null(col), pc.match_substring_regex(col, _NUMBER))
        bad = pc.index(ok, False).as_py()
        if bad >= 0:
            line = bad + 1 + int(header)
            return (
                f"read_series(): non-numeric value {col[bad].as_py()!r} in column {name!r} of {path.name} "
                f"at line {line}; fix or remove it, or choose another column."
            )
    if time_name is not None:
        return (
            f"read_series(): cannot parse time column {time_name!r} of {path.name} ({message}); "
            "pass time_format= (e.g. '%m/%d/%Y %H:%M')."
        )
    return f"read_series(): cannot parse {path.name}: {message}."


def _stack_columns(table: pa.Table, chosen: list[str]) -> torch.Tensor:
    """Columns of a table as a ``(channels, time)`` float tensor, nulls as NaN."""
    rows = []
    for name in chosen:
        col = table.column(name)
        if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type) or pa.types.is_boolean(col.type)):
            raise ReadError(f"read_series(): column {name!r} holds {col.type}, not numbers; choose a numeric column.")
        if not pa.types.is_floating(col.type):
            col = col.cast(pa.float64())
        if col.null_count:
            col = col.fill_null(float("nan"))
        rows.append(to_torch(col))
    if len(rows) == 1:
        return rows[0].unsqueeze(0)
    dtype = rows[0].dtype
    for r in rows[1:]:
        dtype = torch.promote_types(dtype, r.dtype)
    return torch.stack([r.to(dtype) for r in rows])


def _read_parquet(path: Path, column: ColumnSpec, time_column: Any) -> _Raw:
    import pyarrow.parquet as pq  # noqa: PLC0415

    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ReadError(f"read_series(): {path.name} is not a readable Parquet file ({exc}).") from None
    names = list(schema.names)
    chosen, time_name = _pick_columns(names, column, time_column, path.name)
    table = pq.read_table(path, columns=[*chosen, *([time_name] if time_name else [])])
    rate = None
    if schema.metadata and SAMPLING_RATE_KEY in schema.metadata:
        rate = float(schema.metadata[SAMPLING_RATE_KEY])
    times = None
    if time_name is not None:
        times = _times_from_arrow(table.column(time_name), time_name, path.name)
    return _Raw(_stack_columns(table, chosen), chosen, [None] * len(chosen), rate, times, path.name)


def _times_from_arrow(col: pa.ChunkedArray, name: str, source: str) -> np.ndarray:
    if col.null_count:
        raise ReadError(f"read_series(): time column {name!r} of {source} has {col.null_count} empty value(s).")
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        try:
            col = col.cast(pa.timestamp("ns"))
        except pa.ArrowInvalid:
            raise ReadError(
                f"read_series(): cannot parse time column {name!r} of {source} as ISO 8601 times."
            ) from None
    if not pa.types.is_timestamp(col.type) and not pa.types.is_date(col.type):
        raise ReadError(f"read_series(): time column {name!r} of {source} holds {col.type}, not times.")
    return col.to_numpy().astype("datetime64[ns]")


def _read_npy(path: Path, column: ColumnSpec) -> _Raw:
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise ReadError(f"read_series(): {path.name} is not a readable .npy array ({exc}).") from None
    return _raw_from_array(arr, column, path.name)


def _raw_from_array(arr: Any, column: ColumnSpec, source: str) -> _Raw:
    tensor = to_torch(arr)
    if tensor.ndim not in (1, 2):
        raise ReadError(
            f"read_series(): {source} has shape {tuple(tensor.shape)}; expected (time,) or (channels, time)."
        )
    if not (
        tensor.dtype.is_floating_point
        or tensor.dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)
    ):
        raise ReadError(f"read_series(): {source} holds {tensor.dtype}, not numbers.")
    tensor = tensor.unsqueeze(0) if tensor.ndim == 1 else tensor
    names = [f"ch{i}" for i in range(tensor.shape[0])]
    wanted = _as_list(column)
    if wanted is not None:
        idx = _resolve_names(wanted, names, "channel", source)
        tensor, names = tensor[idx], [names[i] for i in idx]
    return _Raw(tensor, names, [None] * len(names), None, None, source)


def _read_wfdb(path: Path, column: ColumnSpec) -> _Raw:
    import wfdb  # noqa: PLC0415

    base = path.with_suffix("") if path.suffix.lower() in _WFDB_SUFFIXES else path
    if not base.with_name(base.name + ".hea").exists():
        raise ReadError(f"read_series(): WFDB header not found: {base}.hea.")
    try:
        head = wfdb.rdheader(str(base))
    except Exception as exc:
        raise ReadError(f"read_series(): cannot read WFDB header {base}.hea ({exc}).") from None
    names = list(head.sig_name or [])
    wanted = _as_list(column)
    idx = list(range(len(names))) if wanted is None else _resolve_names(wanted, names, "channel", base.name)
    try:
        rec = wfdb.rdrecord(str(base), channels=idx, return_res=32)
    except Exception as exc:
        raise ReadError(f"read_series(): cannot read WFDB record {base} ({exc}).") from None
    values = to_torch(np.ascontiguousarray(rec.p_signal.T))
    units = [u for u in (rec.units or [None] * len(idx))]
    return _Raw(values, [rec.sig_name[i] for i in range(len(idx))], units, float(rec.fs), None, base.name)


def _read_object(obj: Any, column: ColumnSpec, time_column: Any) -> _Raw:
    lib = library_of(obj)
    kind = type(obj).__name__
    if lib in ("pandas", "polars") and kind == "DataFrame" or lib == "pyarrow" and kind == "Table":
        table = (
            obj
            if lib == "pyarrow"
            else (pa.Table.from_pandas(obj, preserve_index=False) if lib == "pandas" else obj.to_arrow())
        )
        names = list(table.column_names)
        chosen, time_name = _pick_columns(names, column, time_column, f"the {lib} {kind}")
        times = None if time_name is None else _times_from_arrow(table.column(time_name), time_name, kind)
        return _Raw(_stack_columns(table, chosen), chosen, [None] * len(chosen), None, times, f"{lib} {kind}")
    if time_column is not None:
        raise ReadError(f"read_series(): time_column= needs a table (DataFrame or Table), got a {lib} {kind}.")
    if lib == "pandas" and kind == "Series":
        raw = _raw_from_array(obj, column, "pandas Series")
        name = str(obj.name) if obj.name is not None else "ch0"
        times = None
        index = obj.index
        if getattr(index, "dtype", None) is not None and str(index.dtype).startswith("datetime64"):
            times = index.to_numpy().astype("datetime64[ns]")
        return _Raw(raw.values, [name], [None], None, times, "pandas Series")
    if lib == "polars" and kind == "Series":
        raw = _raw_from_array(obj, column, "Polars Series")
        return _Raw(raw.values, [obj.name or "ch0"], [None], None, None, "Polars Series")
    return _raw_from_array(obj, column, f"{lib} {kind}")


def _order_by_time(
    values: torch.Tensor, times: np.ndarray, policy: DuplicatePolicy, source: str
) -> tuple[torch.Tensor, np.ndarray, TimeReport]:
    ints = times.view(np.int64)
    was_sorted = bool(np.all(np.diff(ints) >= 0))
    if not was_sorted:
        order = np.argsort(ints, kind="stable")
        times, ints = times[order], ints[order]
        values = values[:, torch.from_numpy(order).to(values.device)]
    diffs = np.diff(ints)
    dup_mask = diffs == 0
    n_dup = int(dup_mask.sum())
    positive = diffs[diffs > 0]
    step = float(np.median(positive)) if positive.size else 0.0
    gap_idx = np.flatnonzero(diffs > 1.5 * step) if step > 0 else np.array([], dtype=np.int64)
    missing = np.rint(diffs[gap_idx] / step).astype(np.int64) - 1 if step > 0 else np.array([], dtype=np.int64)
    report = TimeReport(
        n_rows=int(times.size),
        start=times[0],
        end=times[-1],
        step_s=step / 1e9,
        was_sorted=was_sorted,
        n_duplicates=n_dup,
        duplicates=tuple(times[1:][dup_mask][:10]),
        n_gaps=int(gap_idx.size),
        gaps=tuple((times[i], times[i + 1], int(m)) for i, m in zip(gap_idx[:50], missing[:50], strict=True)),
        missing_steps=int(missing.sum()),
        duplicates_policy=policy,
    )
    if n_dup and policy == "error":
        raise ReadError(
            f"read_series(): {source} has {n_dup} duplicate timestamp(s), first {times[1:][dup_mask][0]}; "
            "pass duplicates='first' or 'mean' to resolve them."
        )
    if n_dup and policy in ("first", "mean"):
        starts = np.concatenate([[True], ~dup_mask])
        group = torch.from_numpy(np.cumsum(starts) - 1).to(values.device)
        n_groups = int(starts.sum())
        if policy == "first":
            values = values[:, torch.from_numpy(np.flatnonzero(starts)).to(values.device)]
        else:
            sums = torch.zeros(values.shape[0], n_groups, dtype=values.dtype, device=values.device)
            sums.index_add_(1, group, values)
            counts = torch.bincount(group, minlength=n_groups).to(values.dtype)
            values = sums / counts
        times = times[starts]
    return values, times, report


def _apply_nan_policy(
    x: torch.Tensor, timestamps: torch.Tensor | None, policy: NanPolicy, source: str
) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    """Handle NaNs in ``x`` of shape ``(channels, time)`` on its device."""
    if x.dtype.is_floating_point and bool(torch.isfinite(x.sum())):
        return x, timestamps, 0  # a NaN makes the sum NaN: one read pass rules them out (overflow only costs time)
    mask = torch.isnan(x)
    n_nan = int(mask.sum())
    if n_nan == 0:
        return x, timestamps, 0
    if n_nan == x.numel():
        raise ReadError(f"read_series(): {source} holds only NaN values; check the file and the column.")
    any_nan = mask.any(0)
    if policy == "error":
        first = int(torch.nonzero(any_nan)[0])
        raise ReadError(
            f"read_series(): {source} has {n_nan} NaN value(s), the first at sample {first}; "
            "pass nan='drop' or nan='interpolate' (CLI: --nan drop|interpolate)."
        )
    if policy == "drop":
        keep = ~any_nan
        return x[:, keep], None if timestamps is None else timestamps[keep], n_nan
    out = x.clone()
    position = torch.arange(x.shape[1], device=x.device, dtype=torch.float64)
    if timestamps is not None:
        position = (timestamps - timestamps[0]).to(torch.float64)
    for c in range(x.shape[0]):
        bad = mask[c]
        if not bad.any():
            continue
        valid = torch.nonzero(~bad).squeeze(1)
        if valid.numel() == 0:
            raise ReadError(f"read_series(): channel {c} of {source} holds only NaN values; nothing to interpolate.")
        holes = torch.nonzero(bad).squeeze(1)
        after = torch.searchsorted(valid, holes)  # valid samples before each hole
        # clamping makes holes before the first / after the last valid sample take the nearest value
        left = (after - 1).clamp(min=0)
        right = after.clamp(max=valid.numel() - 1)
        lp, rp = position[valid[left]], position[valid[right]]
        span = torch.where(rp > lp, rp - lp, torch.ones_like(rp))
        w = ((position[holes] - lp) / span).to(x.dtype)
        out[c, holes] = x[c, valid[left]] * (1 - w) + x[c, valid[right]] * w
    return out, timestamps, n_nan


# ----------------------------------------------------------------------------- writing


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    An interrupted or failing writer leaves no file at ``path`` (and no temporary file).
    """
    final = Path(path)
    check_output_dir(final.parent).mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _host(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return value


def _to_table(data: pa.Table | Mapping[str, Any]) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    columns = {}
    for name, value in data.items():
        value = _host(value)
        if isinstance(value, np.ndarray) and value.ndim == 2:
            # a matrix column becomes a fixed-size list column (one row per matrix row)
            flat = pa.array(np.ascontiguousarray(value).reshape(-1))
            columns[name] = pa.FixedSizeListArray.from_arrays(flat, value.shape[1])
        else:
            columns[name] = value
    return pa.table(columns)


def write_parquet(
    data: pa.Table | Mapping[str, Any], path: str | os.PathLike[str], *, sampling_rate: float | None = None
) -> Path:
    """Write a table (or a mapping of column name to 1-D/2-D array or tensor) as Parquet, atomically.

    ``sampling_rate`` (Hz) is stored in the schema metadata and read back by :func:`read_series`.
    """
    import pyarrow.parquet as pq  # noqa: PLC0415

    table = _to_table(data)
    if sampling_rate is not None:
        meta = dict(table.schema.metadata or {})
        meta[SAMPLING_RATE_KEY] = repr(float(sampling_rate)).encode()
        table = table.replace_schema_metadata(meta)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return Path(path)


def write_csv(data: pa.Table | Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a table (or a mapping of column name to 1-D array or tensor) as CSV with a header, atomically."""
    import pyarrow.csv as pacsv  # noqa: PLC0415

    table = _to_table(data)
    with atomic_path(path) as tmp:
        pacsv.write_csv(table, tmp, write_options=pacsv.WriteOptions(quoting_style="needed"))
    return Path(path)


def write_npy(array: Any, path: str | os.PathLike[str]) -> Path:
    """Write an array or tensor as ``.npy``, atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, np.asarray(_host(array)))
    return Path(path)


def write_json(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Write a JSON document (indented, UTF-8), atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=_json_default) + "\n", encoding="utf-8")
    return Path(path)


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return _host(value).tolist()
    if isinstance(value, (Path, np.datetime64, torch.device, torch.dtype)):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


#: WFDB annotation symbols that mark a beat (the PhysioNet/EC57 convention).
BEAT_SYMBOLS = frozenset("NLRBAaJSVrFejnE/fQ?")


@dataclass(frozen=True)
class BeatAnnotations:
    """Reference beats of a WFDB annotation file.

    Attributes
    ----------
    samples : int64 NumPy array of shape ``(n_beats,)``, sorted.
    symbols : NumPy array of shape ``(n_beats,)``: each beat's label (``"N"``, ``"V"``, ``"A"`` ...).
    sampling_rate : Hz, from the annotation file (or its record's header).
    """

    samples: np.ndarray
    symbols: np.ndarray
    sampling_rate: float | None


def read_beat_annotations(path: str | os.PathLike[str], extension: str | None = None) -> BeatAnnotations:
    """Read the beat annotations of a WFDB record (non-beat annotations are left out).

    ``path`` is the annotation file (``100.atr``) or the record name (``100``, with
    ``extension`` defaulting to ``"atr"``).
    """
    import wfdb  # noqa: PLC0415

    p = Path(path)
    if extension is None:
        extension = p.suffix[1:] if p.suffix and p.suffix.lower() not in (".hea", ".dat") else "atr"
    base = p.with_suffix("") if p.suffix else p
    file = base.with_name(f"{base.name}.{extension}")
    if not file.exists():
        raise ReadError(f"read_beat_annotations(): annotation file not found: {file}.")
    try:
        ann = wfdb.rdann(str(base), extension)
    except Exception as exc:
        raise ReadError(f"read_beat_annotations(): cannot read {file} ({exc}).") from None
    symbols = np.asarray(ann.symbol)
    is_beat = np.isin(symbols, sorted(BEAT_SYMBOLS))
    order = np.argsort(ann.sample[is_beat], kind="stable")
    return BeatAnnotations(
        samples=ann.sample[is_beat][order].astype(np.int64),
        symbols=symbols[is_beat][order],
        sampling_rate=float(ann.fs) if ann.fs else None,
    )


def check_output_dir(out: str | os.PathLike[str]) -> Path:
    """``out`` as a Path, or a clear error when it names something that is not a directory."""
    final = Path(out)
    if final.exists() and not final.is_dir():
        raise ReadError(f"output {final} exists and is not a directory; choose another --out.")
    for parent in final.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ReadError(f"cannot create {final}: {parent} is a file; choose another --out.")
            break
    return final


@contextlib.contextmanager
def staged_dir(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``out``; move its files into ``out`` on success.

    A run that fails part-way leaves ``out`` as it was (nothing half-written in it). Files of
    an earlier run in ``out`` that the new run also writes are replaced, each atomically.
    """
    final = check_output_dir(out)
    final.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    try:
        yield stage
        if not final.exists():
            os.replace(stage, final)
            return
        for item in stage.iterdir():
            target = final / item.name
            if target.is_dir() and not item.is_dir():
                raise ReadError(f"cannot replace directory {target} with a file.")
            os.replace(item, target)
    finally:
        if stage.exists():
            import shutil  # noqa: PLC0415

            shutil.rmtree(stage, ignore_errors=True)
