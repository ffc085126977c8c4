"""Tab-separated samples whose first line states their rate: ``# rate: 250`` (Hz).

The line after it names the columns (one per channel, e.g. ``ecg``), then one row per sample::

    # rate: 250
    time_s	ecg
    0.000	-0.061
    ...

A column of times may stand among them (pass the channel by name); the times themselves come
from the stated rate. A plain ``.tsv`` without the first line is read as any other table.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import torch

from devicepipe.core.errors import ReadError
from devicepipe.io.formats.base import FileFormat, ReadRequest
from devicepipe.io.raw import ColumnSpec, RawSeries, column_list, resolve_names

_RATE = re.compile(rb"#\s*rate\s*:\s*(\S*)", re.IGNORECASE)


def _first_line(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.readline(256)


class RateTsvFormat(FileFormat):
    name: ClassVar[str] = "rate-tsv"
    suffixes: ClassVar[tuple[str, ...]] = (".tsv",)
    described: ClassVar[str] = ".tsv with a '# rate: HZ' first line"

    def probe(self, path: Path) -> bool:
        if path.suffix.lower() not in self.suffixes:
            return False
        try:
            return _RATE.match(_first_line(path)) is not None
        except OSError:  # missing or unreadable: not this format's to say
            return False

    def sampling_rate(self, path: Path, column: ColumnSpec = None) -> float:
        stated = _RATE.match(_first_line(path))
        given = "" if stated is None else stated.group(1).decode("ascii", "replace")
        try:
            rate = float(given)
        except ValueError:
            rate = math.nan
        if not (math.isfinite(rate) and rate > 0):
            raise ReadError(
                f"read_series(): {path.name} states its rate as {given!r} on its first line; "
                "write a positive number of Hz there, e.g. '# rate: 250'."
            )
        return rate

    def declares_rate(self, path: Path) -> bool | None:
        return True

    def read(self, path: Path, request: ReadRequest) -> RawSeries:
        rate = self.sampling_rate(path)
        if request.time_column is not None:
            raise ReadError(f"read_series(): {path.name} states its rate; its times come from it, not a column.")
        try:
            table = pacsv.read_csv(
                path,
                read_options=pacsv.ReadOptions(skip_rows=1, encoding=request.encoding or "utf8"),
                parse_options=pacsv.ParseOptions(delimiter="\t"),
            )
        except (pa.ArrowInvalid, OSError) as exc:
            raise ReadError(
                f"read_series(): {path.name} is not a readable table after its rate line ({exc})."
            ) from None
        names = table.column_names
        wanted = column_list(request.column)
        chosen = list(range(len(names))) if wanted is None else resolve_names(wanted, names, "column", path.name)
        start, stop = request.span.start, request.span.stop
        columns = []
        for i in chosen:
            col = table.column(i).slice(start, None if stop is None else stop - start)
            if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
                raise ReadError(f"read_series(): column {names[i]!r} of {path.name} holds {col.type}, not numbers.")
            columns.append(col.cast(pa.float64()).fill_null(math.nan).to_numpy())
        values = torch.from_numpy(np.stack(columns)) if columns else torch.empty(0, 0, dtype=torch.float64)
        return RawSeries(values, [names[i] for i in chosen], [None] * len(chosen), rate, None, path.name)

    def length(self, path: Path, column: ColumnSpec = None) -> int:
        """Rows after the rate line and the column names, counted in one streamed pass."""
        lines, last = 0, b"\n"
        with path.open("rb") as fh:
            while block := fh.read(1 << 22):
                lines += block.count(b"\n")
                last = block[-1:]
        lines += last != b"\n"  # a last row without its line end
        return max(0, lines - 2)
