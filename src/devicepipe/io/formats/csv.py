"""Delimited text tables (``.csv``, ``.tsv``): a column per channel, perhaps a column of times."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from devicepipe.io.formats.base import FileFormat, ReadRequest
from devicepipe.io.raw import ColumnSpec, RawSeries
from devicepipe.io.tables import CSV_DELIMITERS, csv_layout, csv_rows, read_csv_table


class CsvFormat(FileFormat):
    name: ClassVar[str] = "csv"
    suffixes: ClassVar[tuple[str, ...]] = tuple(CSV_DELIMITERS)
    described: ClassVar[str] = ".csv, .tsv"
    label: ClassVar[str] = "CSV/TSV"

    def read(self, path: Path, request: ReadRequest) -> RawSeries:
        delimiter, decimal = csv_layout(path, request.encoding)
        r, span = request, request.span
        return read_csv_table(
            path,
            r.column,
            r.time_column,
            r.time_format,
            r.header,
            delimiter,
            r.encoding,
            span.start,
            span.stop,
            decimal,
        )

    def length(self, path: Path, column: ColumnSpec = None) -> int:
        return csv_rows(path)

    def samples_at_most(self, path: Path, column: ColumnSpec = None) -> int:
        """The file's size in bytes over two (a row holds a value and a line end at least), so that a
        file plainly small enough is not read to be counted."""
        return path.stat().st_size // 2 if path.is_file() else self.length(path, column)
