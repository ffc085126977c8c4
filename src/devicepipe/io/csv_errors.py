"""Why a CSV/TSV file did not parse, in one line: the first value that is not a number (its
line and text), a time column of numbers, a row of more fields than the header names (decimal
commas between commas), or a time layout to give; read again as text only after a failed read."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

__all__ = ["NUMBER", "explain_csv_error"]

#: A field that is a number (or NaN or infinity), as Arrow's CSV reader takes one.
NUMBER = r"^\s*[-+]?((\d+\.?\d*)|(\.\d+))([eE][-+]?\d+)?\s*$|^\s*[-+]?(nan|NaN|NAN|inf|Inf|INF)\s*$"


#: PyArrow's words for a row of more fields than the header names, and the row.
_FIELDS = re.compile(r"Expected (\d+) columns?, got (\d+): (.*)", re.S)


def _too_many_fields(name: str, message: str, delimiter: str) -> tuple[str, str | None] | None:
    """The problem and fix where a row holds more fields than the header names (from PyArrow's
    ``message``): a decimal comma in a comma-separated file where that explains the extra
    fields, else the delimiter or header; None for another error."""
    found = _FIELDS.search(message)
    if found is None:
        return None
    expected, got, row = int(found[1]), int(found[2]), found[3].strip()
    said = f"read_series(): cannot parse {name}: its header names {expected} column(s), and the row {row!r} holds {got}"
    if delimiter == "," and len(re.sub(r"(?<=\d),(?=\d)", ".", row).split(",")) == expected:
        return (
            f"{said} (decimal commas in a comma-separated file?)",
            "save it with ';' between the columns (as spreadsheets that write decimal commas do) or '.' for decimals.",
        )
    return said, "check the delimiter (comma, semicolon or tab) and that the first line names every column."


def explain_csv_error(
    path: Path,
    exc: Exception,
    chosen: list[str],
    time_name: str | None,
    names: list[str],
    header: bool,
    delimiter: str,
    encoding: str,
    decimal: str = ".",
) -> tuple[str, str | None]:
    """Find the first offending value (its line number and text) for a one-line error: the
    problem and, where a setting would help, the fix (see :class:`~devicepipe.core.errors.DevicepipeError`)."""
    message = str(exc)
    read_opts = pacsv.ReadOptions(column_names=names, skip_rows=1 if header else 0, encoding=encoding)
    as_text = pacsv.ConvertOptions(
        include_columns=[*chosen, *([time_name] if time_name else [])],
        column_types={n: pa.string() for n in [*chosen, *([time_name] if time_name else [])]},
    )
    try:
        table = pacsv.read_csv(
            path, read_options=read_opts, parse_options=pacsv.ParseOptions(delimiter=delimiter), convert_options=as_text
        )
    except pa.ArrowInvalid:
        return _too_many_fields(path.name, message, delimiter) or (
            f"read_series(): cannot parse {path.name}: {message}.",
            None,
        )
    if time_name is not None:
        times = table.column(time_name)
        if (
            times.null_count < len(times)
            and pc.all(pc.or_(pc.is_null(times), pc.match_substring_regex(times, NUMBER))).as_py()
        ):
            return (
                f"read_series(): time column {time_name!r} of {path.name} holds numbers, not times; "
                "pass the column of timestamps as the time column (e.g. Datetime).",
                None,
            )
    for name in chosen:
        col = table.column(name)
        written = pc.replace_substring(col, ",", ".") if decimal == "," else col
        ok = pc.or_(pc.is_null(col), pc.match_substring_regex(written, NUMBER))
        bad = pc.index(ok, False).as_py()
        if bad >= 0:
            line = bad + 1 + int(header)
            return (
                f"read_series(): non-numeric value {col[bad].as_py()!r} in column {name!r} of {path.name} "
                f"at line {line}; fix or remove it, or choose another column.",
                None,
            )
    if time_name is not None:
        return (
            f"read_series(): cannot parse time column {time_name!r} of {path.name} ({message})",
            "pass {time_format=} (e.g. {time_format='%m/%d/%Y %H:%M'}).",
        )
    return f"read_series(): cannot parse {path.name}: {message}.", None
