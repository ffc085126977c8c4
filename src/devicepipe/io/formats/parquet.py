"""Parquet files: a column per channel, and the rate devicepipe stores in the file's metadata."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pyarrow.parquet as pq

from devicepipe.io.formats.base import FileFormat, ReadRequest
from devicepipe.io.raw import ColumnSpec, RawSeries
from devicepipe.io.tables import PARQUET_SUFFIXES, parquet_sampling_rate, read_parquet_table


class ParquetFormat(FileFormat):
    name: ClassVar[str] = "parquet"
    suffixes: ClassVar[tuple[str, ...]] = tuple(sorted(PARQUET_SUFFIXES))
    described: ClassVar[str] = ".parquet"
    label: ClassVar[str] = "Parquet"

    def read(self, path: Path, request: ReadRequest) -> RawSeries:
        return read_parquet_table(path, request.column, request.time_column, request.span.start, request.span.stop)

    def sampling_rate(self, path: Path, column: ColumnSpec = None) -> float | None:
        return parquet_sampling_rate(path) if path.is_file() else None

    def declares_rate(self, path: Path) -> bool | None:
        return parquet_sampling_rate(path) is not None if path.is_file() else None

    def length(self, path: Path, column: ColumnSpec = None) -> int:
        return int(pq.ParquetFile(path).metadata.num_rows)
