"""EDF and BDF files (European Data Format, 16- and 24-bit)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from devicepipe.core.errors import ReadError
from devicepipe.io.edf import EDF_SUFFIXES, edf_header, read_edf
from devicepipe.io.formats.base import FileFormat, ReadRequest
from devicepipe.io.raw import ColumnSpec, RawSeries, column_list, resolve_names


class EdfFormat(FileFormat):
    name: ClassVar[str] = "edf"
    suffixes: ClassVar[tuple[str, ...]] = tuple(sorted(EDF_SUFFIXES, reverse=True))
    described: ClassVar[str] = ".edf, .bdf"
    label: ClassVar[str] = "EDF/BDF"

    def read(self, path: Path, request: ReadRequest) -> RawSeries:
        if request.time_column is not None:
            raise ReadError(f"read_series(): {path.name} is an EDF file; its times come from its rate, not a column.")
        return read_edf(path, request.column, request.span.start, request.span.stop)

    def _signals(self, path: Path, column: ColumnSpec) -> tuple[dict, list[int] | None]:
        head = edf_header(path)
        wanted = column_list(column)
        return head, None if wanted is None else resolve_names(wanted, head["labels"], "signal", path.name)

    def sampling_rate(self, path: Path, column: ColumnSpec = None) -> float | None:
        head, idx = self._signals(path, column)
        return head["rates"][0 if idx is None else idx[0]]

    def declares_rate(self, path: Path) -> bool | None:
        return True

    def length(self, path: Path, column: ColumnSpec = None) -> int:
        head, idx = self._signals(path, column)
        return min(head["lengths"][i] for i in (range(len(head["labels"])) if idx is None else idx))
