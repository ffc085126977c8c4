"""Tables through Arrow: CSV/TSV files, Parquet files and in-memory frames (pandas, Polars, PyArrow).

PyArrow parses only the requested columns, numbers straight to float32 and times to
nanoseconds; the columns reach torch without a copy where Arrow's buffers allow. A CSV that
does not parse is read again as text to name the first offending value and its line
(:mod:`devicepipe.io.csv_errors`).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import torch

from devicepipe.core.errors import ReadError
from devicepipe.core.interop import convert
from devicepipe.io.clock import arrow_times, index_times
from devicepipe.io.csv_errors import explain_csv_error
from devicepipe.io.raw import ColumnSpec, RawSeries, pick_columns

__all__ = [
    "CSV_DELIMITERS",
    "PARQUET_SUFFIXES",
    "SAMPLING_RATE_KEY",
    "parquet_sampling_rate",
    "csv_layout",
    "csv_rows",
    "read_csv_table",
    "table_head",
    "read_frame",
    "read_parquet_table",
    "stack_columns",
]

#: Parquet schema-metadata key under which devicepipe stores a recording's sampling rate (Hz).
SAMPLING_RATE_KEY = b"devicepipe.sampling_rate"
#: File suffixes read as delimited text, and their delimiters.
CSV_DELIMITERS = {".csv": ",", ".tsv": "\t"}
PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
#: Delimiters a ``.csv`` may hold instead of commas, in the order they are tried (see :func:`csv_layout`).
OTHER_DELIMITERS = (";", "\t", "|")

_TIME_PARSERS = ("%m/%d/%Y %H:%M", "%m/%d/%Y %H:%M:%S", "%Y-%m-%d %H:%M", "%d.%m.%Y %H:%M")


def _looks_numeric(fields: list[str], decimal: str = ".") -> bool:
    for f in fields:
        try:
            float(f.replace(",", ".") if decimal == "," else f)
        except ValueError:
            return False
    return True


def csv_layout(path: Path, encoding: str | None = None) -> tuple[str, str]:
    """The field delimiter and the decimal mark of a delimited text file (``path`` a ``.csv`` or
    ``.tsv``): the suffix's delimiter (:data:`CSV_DELIMITERS`) and ``"."``, except for a ``.csv``
    laid out with semicolons: the export of spreadsheets in locales that write decimals with a
    comma (``Datetime;load`` then ``2023-01-01 00:00;512,5``). Then ``";"``, and ``","`` as the
    decimal mark where the numbers are written so.

    Judged from the file's first three lines: semicolons when each line splits into the same
    number of fields at semicolons but not at commas (a header ``a;b`` has no comma at all); or,
    where both split evenly (no header, ``1,5;2``), when the last line's fields are numbers only
    when split at semicolons. Tabs and ``|``, which other exports put between fields of a file
    they still name ``.csv``, are judged the same way (:data:`OTHER_DELIMITERS`).
    """
    delimiter = CSV_DELIMITERS[path.suffix.lower()]
    if delimiter != ",":
        return delimiter, "."
    try:
        with path.open("rb") as fh:
            probe = fh.read(_PROBE_BYTES)
    except OSError:
        return delimiter, "."  # the reader says what is wrong
    utf16 = encoding is None and probe.startswith((b"\xff\xfe", b"\xfe\xff"))
    text = probe.decode("utf-16" if utf16 else encoding or "utf-8", errors="replace")
    pieces = re.split(r"\r\n|\n|\r", text)
    if len(probe) == _PROBE_BYTES and len(pieces) > 1:
        pieces = pieces[:-1]  # the probe may end inside its last line
    lines = [line for line in pieces[:3] if line.strip()]

    def even(mark: str) -> bool:  # every line splits into the same number (>= 2) of fields
        return len({line.count(mark) for line in lines}) == 1 and lines[0].count(mark) >= 1

    for mark in (m for m in OTHER_DELIMITERS if lines and m in lines[-1]):
        fields = lines[-1].split(mark)
        decimal = "," if any(_DECIMAL_COMMA.match(f) for f in fields) else "."
        if even(mark) and not even(","):
            return mark, decimal
        if even(mark) and not _looks_numeric(lines[-1].split(",")) and _looks_numeric(fields, decimal):
            return mark, decimal
    return delimiter, "."


#: A number written with a decimal comma (``-0,5``, ``12,25``, ``1,5e-3``).
_DECIMAL_COMMA = re.compile(r"^\s*[-+]?\d*,\d+([eE][-+]?\d+)?\s*$")


#: A header or first row with more fields than this is not a recording laid out as columns.
MAX_COLUMNS = 10_000
#: Bytes read to judge whether a file is text at all.
_PROBE_BYTES = 1 << 16


_SLASH_DATE = re.compile(r"^\s*(\d{1,2})/(\d{1,2})/(\d{4})(?:[ T](\d{1,2}):(\d{2})(:\d{2})?)?\s*$")


def _slash_date_format(path: Path, read_opts: pacsv.ReadOptions, delimiter: str, time_name: str) -> str | None:
    """The strptime format of a time column of ``dd/mm/yyyy`` or ``mm/dd/yyyy`` dates, decided
    from the data: day first when some first field exceeds 12, month first when some second one
    does; when neither does, the order cannot be told and a clear error asks for it. None when
    the column holds no such dates (ISO 8601 and the other forms are tried as usual)."""
    convert = pacsv.ConvertOptions(include_columns=[time_name], column_types={time_name: pa.string()})
    try:
        column = pacsv.read_csv(
            path, read_options=read_opts, parse_options=pacsv.ParseOptions(delimiter=delimiter), convert_options=convert
        ).column(time_name)
    except (pa.ArrowInvalid, pa.ArrowKeyError):
        return None  # the main read explains the problem
    values = [v for v in column.drop_null().to_pylist() if v.strip()]
    matches = [_SLASH_DATE.match(v) for v in values]
    if not values or not all(matches):
        return None
    firsts = [int(m.group(1)) for m in matches if m]
    seconds = [int(m.group(2)) for m in matches if m]
    first = next(m for m in matches if m)
    clock = "" if first.group(4) is None else (" %H:%M:%S" if first.group(6) else " %H:%M")
    if max(firsts) > 12 and max(seconds) <= 12:
        return "%d/%m/%Y" + clock
    if max(seconds) > 12 and max(firsts) <= 12:
        return "%m/%d/%Y" + clock
    problem = (
        f"read_series(): the dates of {time_name!r} in {path.name} (e.g. {values[0].strip()!r}) could be day first "
        "or month first"
    )
    raise ReadError(
        problem,
        fix=f"say which with {{time_format='%d/%m/%Y{clock}'}} or {{time_format='%m/%d/%Y{clock}'}}.",
        param="time_format",
    )


def _looks_binary(probe: bytes) -> bool:
    """Whether bytes look like binary data rather than text in a one-byte-based encoding: a NUL,
    or more than 1 % control bytes other than tab, line feed and carriage return."""
    if b"\x00" in probe:
        return True
    control = sum(probe.count(bytes([c])) for c in (*range(1, 9), 11, 12, *range(14, 32)))
    return control > 0.01 * max(1, len(probe))


def _first_row(path: Path, delimiter: str, encoding: str | None) -> tuple[list[str], str]:
    """The first row of a delimited text file and the file's encoding: the one given, else UTF-16
    when the file starts with its byte-order mark, else UTF-8 (a byte-order mark removed). A clear
    error when the file is empty, binary, not in the encoding, or laid out as one wide row."""
    source = path.name
    with path.open("rb") as fh:
        probe = fh.read(_PROBE_BYTES)
    if encoding is None:
        encoding = "utf-16" if probe.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8"
    if encoding == "utf-8" and _looks_binary(probe):
        raise ReadError(f"read_series(): {source} holds binary data, not a text table; is it the right file?")
    try:
        text = probe.decode(encoding, errors="strict" if encoding.lower().replace("-", "") == "utf8" else "replace")
    except UnicodeDecodeError as exc:
        if len(probe) - exc.start > 4:  # not merely a character cut at the end of the probe
            problem = f"read_series(): {source} is not UTF-8 text (byte {exc.start:,} is {probe[exc.start]:#04x})"
            raise ReadError(problem, fix="pass its encoding, e.g. {encoding='latin-1'}.", param="encoding") from None
        text = probe[: exc.start].decode("utf-8")
    except LookupError:
        raise ReadError(f"read_series(): unknown text encoding {encoding!r}; e.g. 'utf-8', 'latin-1'.") from None
    if "\x00" in text:
        raise ReadError(f"read_series(): {source} holds binary data, not a text table; is it the right file?")
    if not text.strip():
        raise ReadError(f"read_series(): {source} is empty; a CSV needs at least one row of numbers.")
    lines = re.split(r"\r\n|\n|\r", text, maxsplit=1)  # the line endings Arrow's reader knows
    line = lines[0]
    if (len(lines) == 1 and len(probe) == _PROBE_BYTES) or line.count(delimiter) >= MAX_COLUMNS:
        raise ReadError(
            f"read_series(): the first line of {source} holds more than {MAX_COLUMNS:,} fields: a recording "
            "belongs in columns, one sample per row; is the file transposed?"
        )
    try:
        first = next(csv.reader([line.removeprefix("\ufeff")], delimiter=delimiter), None)
    except csv.Error as exc:
        raise ReadError(
            f"read_series(): cannot read the first line of {source} as {delimiter!r}-separated ({exc})."
        ) from None
    if not first:
        raise ReadError(f"read_series(): {source} is empty; a CSV needs at least one row of numbers.")
    return first, encoding


def _trailing_empty_lines(path: Path, encoding: str) -> int:
    """How many empty lines end a text file, after its last line of data: an editor's or an
    export's, not rows (an empty line before the end is a row, a missing sample, read as NaN: it
    keeps the samples after it in place). Read from the file's last :data:`_PROBE_BYTES`."""
    size = path.stat().st_size
    take = min(size, _PROBE_BYTES) & ~1  # (an even count: UTF-16's code units stay whole)
    with path.open("rb") as fh:
        fh.seek(size - take)
        tail = fh.read(take).decode(encoding, errors="ignore")
    lines = re.split(r"\r\n|\n|\r", tail)  # the line endings Arrow's reader knows
    if lines and lines[-1] == "":  # (the last line's own ending)
        lines.pop()
    count = 0
    while count < len(lines) - 1 and lines[-1 - count] == "":
        count += 1
    return count


def csv_rows(path: Path, encoding: str | None = None) -> int:
    """The data rows of a delimited text file (its header line, when it has one, and the empty
    lines that end it not counted), counted in one streamed pass that converts no value: memory
    flat in the file's size."""
    delimiter, decimal = csv_layout(path, encoding)
    first, encoding = _first_row(path, delimiter, encoding)
    names = [f"f{i}" for i in range(len(first))]
    read_opts = pacsv.ReadOptions(
        column_names=names, skip_rows=0 if _looks_numeric(first, decimal) else 1, encoding=encoding
    )
    convert = pacsv.ConvertOptions(include_columns=names[:1], column_types={names[0]: pa.string()})
    parse = pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=False)
    rows = 0
    try:
        with pacsv.open_csv(path, read_options=read_opts, parse_options=parse, convert_options=convert) as reader:
            for batch in reader:
                rows += batch.num_rows
    except pa.ArrowInvalid as exc:
        raise ReadError(f"read_series(): cannot parse {path.name}: {exc}.") from None
    return max(0, rows - _trailing_empty_lines(path, encoding))


def table_head(path: Path, rows: int, encoding: str | None = None) -> pa.Table:
    """The first ``rows`` rows of a CSV/TSV or Parquet file, every column, with the types the
    readers infer (numbers, timestamps, text), the rest of the file unread. Column names as
    :func:`read_csv_table` and :func:`read_parquet_table` give them."""
    if path.suffix.lower() in PARQUET_SUFFIXES:
        try:
            batch = next(pq.ParquetFile(path).iter_batches(batch_size=rows), None)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ReadError(f"read_series(): cannot read {path.name} as Parquet ({exc}).") from None
        return pa.table({}) if batch is None else pa.Table.from_batches([batch])
    delimiter, decimal = csv_layout(path, encoding)
    first, encoding = _first_row(path, delimiter, encoding)
    header = not _looks_numeric(first, decimal)
    names = [f.strip() for f in first] if header else [f"f{i}" for i in range(len(first))]
    read_opts = pacsv.ReadOptions(column_names=names, skip_rows=1 if header else 0, encoding=encoding)
    parse = pacsv.ParseOptions(delimiter=delimiter)
    convert = pacsv.ConvertOptions(decimal_point=decimal, timestamp_parsers=[pacsv.ISO8601, *_TIME_PARSERS])
    try:
        return _read_rows(path, read_opts, parse, convert, rows)
    except (pa.ArrowInvalid, pa.ArrowKeyError) as exc:
        raise ReadError(f"read_series(): cannot parse {path.name}: {exc}.") from None


def read_csv_table(
    path: Path,
    column: ColumnSpec,
    time_column: str | int | None,
    time_format: str | None,
    header: bool | None,
    delimiter: str,
    encoding: str | None = None,
    start: int = 0,
    stop: int | None = None,
    decimal: str = ".",
) -> RawSeries:
    """The chosen columns of a delimited text file (``header=None`` detects a header line) in
    ``encoding`` (None: UTF-16 by its byte-order mark, else UTF-8), numbers written with the
    ``decimal`` mark (see :func:`csv_layout`); data rows ``[start, stop)`` only (skipped rows
    are not parsed; reading stops after ``stop``)."""
    source = path.name
    first, encoding = _first_row(path, delimiter, encoding)
    if header is None:
        header = not _looks_numeric(first, decimal)
    names = _header_names(first, source) if header else [f"f{i}" for i in range(len(first))]
    chosen, time_name = pick_columns(names, column, time_column, source)

    types: dict[str, pa.DataType] = {n: pa.float32() for n in chosen}
    if time_name is not None:
        types[time_name] = pa.timestamp("ns")
    read_opts = pacsv.ReadOptions(
        column_names=names, skip_rows=1 if header else 0, autogenerate_column_names=False, encoding=encoding
    )
    if start or stop is not None:
        read_opts.skip_rows_after_names = start
    if time_name is not None and time_format is None:
        time_format = _slash_date_format(path, read_opts, delimiter, time_name)
    parsers = [time_format] if time_format else [pacsv.ISO8601, *_TIME_PARSERS]
    convert = pacsv.ConvertOptions(
        include_columns=[*chosen, *([time_name] if time_name else [])],
        column_types=types,
        timestamp_parsers=parsers,
        decimal_point=decimal,
    )
    parse = pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=False)  # never drop a row in silence
    rows = None if stop is None else stop - start
    try:
        table, as_text = _read_times_or_text(path, read_opts, parse, convert, time_name, time_format, rows)
        if stop is None:  # (read to the end: the empty lines that end the file are not rows)
            table = _without_trailing_empty_lines(table, _trailing_empty_lines(path, encoding))
        times, wall = (None, None) if time_name is None else _csv_times(table, time_name, source, as_text)
    except (pa.ArrowInvalid, pa.ArrowKeyError) as exc:
        problem, fix = explain_csv_error(path, exc, chosen, time_name, names, header, delimiter, encoding, decimal)
        if fix is not None and time_format is not None:  # the format given does not fit: say so, not to pass one
            fix = fix.replace("pass {time_format=}", f"check {{time_format={time_format!r}}}")
        raise ReadError(problem, fix=fix, param=None if fix is None else "time_format") from None
    return RawSeries(stack_columns(table, chosen), chosen, [None] * len(chosen), None, times, source, wall)


def _without_trailing_empty_lines(table: pa.Table, empty: int) -> pa.Table:
    """``table`` less its last ``empty`` rows where the file ends in that many empty lines
    (:func:`_trailing_empty_lines`) and those rows hold nothing (every column null)."""
    if not empty or empty > table.num_rows:
        return table
    last = table.slice(table.num_rows - empty)
    if any(col.null_count != empty for col in last.columns):
        return table
    return table.slice(0, table.num_rows - empty)


def _header_names(first: list[str], source: str) -> list[str]:
    """The column names of a header line, each named once."""
    names = [f.strip() for f in first]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ReadError(
            f"read_series(): {source} names more than one column {repeated[0]!r}"
            f"{' (an empty header cell)' if repeated[0] == '' else ''}; give every column its own name."
        )
    return names


def _read_times_or_text(
    path: Path,
    read_opts: pacsv.ReadOptions,
    parse: pacsv.ParseOptions,
    convert: pacsv.ConvertOptions,
    time_name: str | None,
    time_format: str | None,
    rows: int | None,
) -> tuple[pa.Table, pa.ArrowInvalid | None]:
    """The CSV's rows (:func:`_read_rows`), its time column read as times; where they do not parse
    as times, read as text, with why (ISO 8601 times with UTC offsets: :func:`_csv_times`)."""
    try:
        return _read_rows(path, read_opts, parse, convert, rows), None
    except pa.ArrowInvalid as exc:
        if time_name is None or time_format is not None or "timestamp" not in str(exc):
            raise
        convert.column_types = {**convert.column_types, time_name: pa.string()}
        convert.strings_can_be_null = True
        try:
            return _read_rows(path, read_opts, parse, convert, rows), exc
        except (pa.ArrowInvalid, pa.ArrowKeyError):
            raise exc from None


def _csv_times(
    table: pa.Table, time_name: str, source: str, as_text: pa.ArrowInvalid | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The time column's instants and wall-clock times (:func:`~devicepipe.io.clock.arrow_times`).
    Read as text (``as_text``: why it was not read as times), every time must end in a UTC
    offset (2020-01-01T00:00:00+02:00; a time without one fails the cast to UTC there), else
    that first failure is the one to explain."""
    col = table.column(time_name)
    try:
        return arrow_times(col, time_name, source)
    except ReadError:
        if as_text is None or col.null_count:
            raise
        raise as_text from None


def _read_rows(
    path: Path,
    read_opts: pacsv.ReadOptions,
    parse: pacsv.ParseOptions,
    convert: pacsv.ConvertOptions,
    rows: int | None,
) -> pa.Table:
    """The whole CSV, or its first ``rows`` rows by PyArrow's streaming reader (the rest unread)."""
    if rows is None:
        return pacsv.read_csv(path, read_options=read_opts, parse_options=parse, convert_options=convert)
    batches, have = [], 0
    with pacsv.open_csv(path, read_options=read_opts, parse_options=parse, convert_options=convert) as reader:
        schema = reader.schema
        for batch in reader:
            batches.append(batch)
            have += batch.num_rows
            if have >= rows:
                break
    return pa.Table.from_batches(batches, schema=schema).slice(0, rows)


def stack_columns(table: pa.Table, chosen: list[str]) -> torch.Tensor:
    """Columns of a table as a ``(channels, time)`` float tensor, nulls as NaN (one column: no copy)."""
    rows = []
    for name in chosen:
        col = table.column(name)
        if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type) or pa.types.is_boolean(col.type)):
            problem = f"read_series(): column {name!r} holds {col.type}, not numbers"
            if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
                raise ReadError(
                    problem,
                    fix=f"pass it as the time column ({{time_column={name!r}}}) or choose a numeric column.",
                    param="column",
                    value=name,
                )
            raise ReadError(f"{problem}; choose a numeric column.")
        if not pa.types.is_floating(col.type):
            col = col.cast(pa.float64())
        if col.null_count:
            col = col.fill_null(float("nan"))
        rows.append(convert(col).tensor)
    if len(rows) == 1:
        return rows[0].unsqueeze(0)
    dtype = rows[0].dtype
    for r in rows[1:]:
        dtype = torch.promote_types(dtype, r.dtype)
    return torch.stack([r.to(dtype) for r in rows])


def read_parquet_table(
    path: Path, column: ColumnSpec, time_column: str | int | None, start: int = 0, stop: int | None = None
) -> RawSeries:
    """The chosen columns of a Parquet file, and the sampling rate devicepipe stored in its
    metadata; rows ``[start, stop)`` only (only the row groups that hold them are read)."""
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise ReadError(f"read_series(): {path.name} is not a readable Parquet file ({exc}).") from None
    names = list(schema.names)
    chosen, time_name = pick_columns(names, column, time_column, path.name)
    try:  # pages written with checksums (as devicepipe writes them) are verified
        columns = [*chosen, *([time_name] if time_name else [])]
        table = _row_range(path, columns, start, stop)
    except (pa.ArrowException, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ReadError(f"read_series(): {path.name} is damaged or not a readable Parquet file ({first}).") from None
    rate = _rate_of(schema)
    times, wall = (None, None) if time_name is None else arrow_times(table.column(time_name), time_name, path.name)
    return RawSeries(stack_columns(table, chosen), chosen, [None] * len(chosen), rate, times, path.name, wall)


def _row_range(path: Path, columns: list[str], start: int, stop: int | None) -> pa.Table:
    """Rows ``[start, stop)`` of some columns, reading only the row groups that hold them, each
    checked against the statistics the file keeps of it (:func:`_check_statistics`)."""
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    with pq.ParquetFile(path) as f:
        meta, schema = f.metadata, f.schema_arrow
    ends = np.cumsum([meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
    stop = int(ends[-1]) if stop is None or not len(ends) else min(stop, int(ends[-1]))
    groups = [i for i in range(len(ends)) if ends[i] > start and ends[i] - meta.row_group(i).num_rows < stop]
    if not groups:
        return pa.table({c: pa.array([], schema.field(c).type) for c in columns})
    first = int(ends[groups[0]] - meta.row_group(groups[0]).num_rows)
    # a dataset fragment decodes the row groups on all cores (ParquetFile.read_row_groups decodes
    # one column's groups one after another: 3x slower on 16 cores)
    checked = ds.ParquetFragmentScanOptions(page_checksum_verification=True)
    fragment = ds.ParquetFileFormat(default_fragment_scan_options=checked).make_fragment(
        str(path), filesystem=pafs.LocalFileSystem(), row_groups=groups
    )
    table = fragment.to_table(columns=columns, use_threads=True)
    _check_statistics(table, meta, groups, path.name)
    return table.slice(start - first, stop - start)


def _check_statistics(table: pa.Table, meta: pq.FileMetaData, groups: list[int], name: str) -> None:
    """Refuse numbers outside the minimum and maximum the file records for their row group: a page
    changed after it was written (Parquet checksums its pages only when asked to)."""
    offset = 0
    for group in groups:
        rows = meta.row_group(group)
        for i in range(rows.num_columns):
            chunk, stats = rows.column(i), rows.column(i).statistics
            column = chunk.path_in_schema
            if column not in table.column_names or stats is None or not stats.has_min_max:
                continue
            values = table.column(column).slice(offset, rows.num_rows)
            if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
                continue
            least, most = _stat(stats.min, values.type), _stat(stats.max, values.type)
            if least is None or most is None:
                continue
            low, high = _min_max(values)
            if low is not None and high is not None and (low < least or high > most):
                raise ReadError(
                    f"read_series(): {name} is damaged: column {column!r} of row group {group} holds values from "
                    f"{low:g} to {high:g}, outside the {least:g} to {most:g} the file "
                    "records for them. Write the file again from its source."
                )
        offset += rows.num_rows


def _stat(value: Any, kind: pa.DataType) -> float | None:
    """A row group's recorded minimum or maximum as a number: half floats are recorded as their two
    bytes (pyarrow does not decode them); None for anything else that is not a number."""
    if isinstance(value, bytes) and pa.types.is_float16(kind) and len(value) == 2:
        return float(np.frombuffer(value, dtype="<f2")[0])
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _min_max(values: pa.ChunkedArray) -> tuple[float | None, float | None]:
    """The least and greatest number of a numeric column, nulls and NaN left out as Parquet's
    statistics leave them out; (None, None) when none is left. Without nulls NumPy reads the
    Arrow buffers in place (a 65,536-row group in about 20 us, where one ``pyarrow.compute``
    call costs about 250 us, and a 20 M-sample file has 306 groups)."""
    if values.null_count == 0 and values.num_chunks == 1:
        a = values.chunk(0).to_numpy(zero_copy_only=True)
        if a.size == 0:
            return None, None
        low, high = np.fmin.reduce(a), np.fmax.reduce(a)  # fmin/fmax pass NaN over
        return (None, None) if np.isnan(low) else (low.item(), high.item())
    low, high = pc.min_max(values).values()
    return (low.as_py(), high.as_py()) if low.is_valid else (None, None)


def _rate_of(schema: pa.Schema) -> float | None:
    """The sampling rate in a schema's metadata: None without one, NaN when it is not a number
    (:func:`devicepipe.io.read_series` then asks for the rate, unless it is given)."""
    if not (schema.metadata and SAMPLING_RATE_KEY in schema.metadata):
        return None
    try:
        return float(schema.metadata[SAMPLING_RATE_KEY])
    except ValueError:
        return float("nan")


def parquet_sampling_rate(path: Path) -> float | None:
    """The sampling rate (Hz) stored in a Parquet file's metadata, read from its footer alone."""
    try:
        return _rate_of(pq.read_schema(path))
    except (pa.ArrowInvalid, OSError) as exc:
        raise ReadError(f"read_series(): {path.name} is not a readable Parquet file ({exc}).") from None


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
    zoned = None if time_name is None else arrow_times(table.column(time_name), time_name, kind)
    if zoned is None and lib == "pandas":
        zoned = index_times(obj, kind)  # a DatetimeIndex: the times, as of a pandas Series
    times, wall = zoned or (None, None)
    return RawSeries(stack_columns(table, chosen), chosen, [None] * len(chosen), None, times, f"{lib} {kind}", wall)
