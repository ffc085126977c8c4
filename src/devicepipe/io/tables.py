"""Tables through Arrow: CSV/TSV files, Parquet files and in-memory frames (pandas, Polars, PyArrow).

PyArrow parses only the requested columns, numbers straight to float32 and times to
nanoseconds; the columns reach torch without a copy where Arrow's buffers allow. A CSV that
does not parse is read again as text to name the first offending value and its line.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import torch

from devicepipe.errors import ReadError
from devicepipe.interop import to_torch
from devicepipe.io.raw import ColumnSpec, RawSeries, pick_columns

__all__ = [
    "CSV_DELIMITERS",
    "PARQUET_SUFFIXES",
    "SAMPLING_RATE_KEY",
    "parquet_sampling_rate",
    "read_csv_table",
    "read_frame",
    "read_parquet_table",
    "stack_columns",
    "times_from_arrow",
]

#: Parquet schema-metadata key under which devicepipe stores a recording's sampling rate (Hz).
SAMPLING_RATE_KEY = b"devicepipe.sampling_rate"
#: File suffixes read as delimited text, and their delimiters.
CSV_DELIMITERS = {".csv": ",", ".tsv": "\t"}
PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})

_TIME_PARSERS = ("%m/%d/%Y %H:%M", "%m/%d/%Y %H:%M:%S", "%Y-%m-%d %H:%M", "%d.%m.%Y %H:%M")
_NUMBER = r"^\s*[-+]?((\d+\.?\d*)|(\.\d+))([eE][-+]?\d+)?\s*$|^\s*[-+]?(nan|NaN|NAN|inf|Inf|INF)\s*$"


def _looks_numeric(fields: list[str]) -> bool:
    for f in fields:
        try:
            float(f)
        except ValueError:
            return False
    return True


def read_csv_table(
    path: Path,
    column: ColumnSpec,
    time_column: str | int | None,
    time_format: str | None,
    header: bool | None,
    delimiter: str,
) -> RawSeries:
    """The chosen columns of a delimited text file (``header=None`` detects a header line)."""
    source = path.name
    with path.open(newline="", encoding="utf-8", errors="replace") as fh:
        first = next(csv.reader(fh, delimiter=delimiter), None)
    if not first:
        raise ReadError(f"read_series(): {source} is empty; a CSV needs at least one row of numbers.")
    if header is None:
        header = not _looks_numeric(first)
    names = [f.strip() for f in first] if header else [f"f{i}" for i in range(len(first))]
    chosen, time_name = pick_columns(names, column, time_column, source)

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
    return RawSeries(stack_columns(table, chosen), chosen, [None] * len(chosen), None, times, source)


def _explain_csv_error(
    path: Path, exc: Exception, chosen: list[str], time_name: str | None, names: list[str], header: bool, delimiter: str
) -> str:
    """Find the first offending value (its line number and text) for a one-line error."""
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
                "pass the column of timestamps as the time column (e.g. Datetime)."
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


def stack_columns(table: pa.Table, chosen: list[str]) -> torch.Tensor:
    """Columns of a table as a ``(channels, time)`` float tensor, nulls as NaN (one column: no copy)."""
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


def read_parquet_table(path: Path, column: ColumnSpec, time_column: str | int | None) -> RawSeries:
    """The chosen columns of a Parquet file, and the sampling rate devicepipe stored in its metadata."""
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ReadError(f"read_series(): {path.name} is not a readable Parquet file ({exc}).") from None
    names = list(schema.names)
    chosen, time_name = pick_columns(names, column, time_column, path.name)
    table = pq.read_table(path, columns=[*chosen, *([time_name] if time_name else [])])
    rate = _rate_of(schema)
    times = None
    if time_name is not None:
        times = times_from_arrow(table.column(time_name), time_name, path.name)
    return RawSeries(stack_columns(table, chosen), chosen, [None] * len(chosen), rate, times, path.name)


def _rate_of(schema: pa.Schema) -> float | None:
    if schema.metadata and SAMPLING_RATE_KEY in schema.metadata:
        return float(schema.metadata[SAMPLING_RATE_KEY])
    return None


def parquet_sampling_rate(path: Path) -> float | None:
    """The sampling rate (Hz) stored in a Parquet file's metadata, read from its footer alone."""
    try:
        return _rate_of(pq.read_schema(path))
    except (pa.ArrowInvalid, OSError) as exc:
        raise ReadError(f"read_series(): {path.name} is not a readable Parquet file ({exc}).") from None


def times_from_arrow(col: pa.ChunkedArray, name: str, source: str) -> np.ndarray:
    """An Arrow time column (timestamps, dates or ISO 8601 strings) as ``datetime64[ns]``."""
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


def read_frame(obj: Any, lib: str, column: ColumnSpec, time_column: str | int | None) -> RawSeries:
    """The chosen columns of an in-memory pandas or Polars DataFrame or PyArrow Table (``lib`` names which)."""
    kind = type(obj).__name__
    if lib == "pyarrow":
        table = obj
    elif lib == "pandas":
        table = pa.Table.from_pandas(obj, preserve_index=False)
    else:
        table = obj.to_arrow()
    names = list(table.column_names)
    chosen, time_name = pick_columns(names, column, time_column, f"the {lib} {kind}")
    times = None if time_name is None else times_from_arrow(table.column(time_name), time_name, kind)
    return RawSeries(stack_columns(table, chosen), chosen, [None] * len(chosen), None, times, f"{lib} {kind}")
