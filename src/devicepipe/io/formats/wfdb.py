"""WFDB records (PhysioNet): a header (``.hea``) and signal files, named by the record."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from devicepipe.core.errors import ReadError
from devicepipe.io.formats.base import FileFormat, ReadRequest
from devicepipe.io.raw import ColumnSpec, RawSeries
from devicepipe.io.wfdb import import_wfdb, is_wfdb_record, read_wfdb, record_base, wfdb_sampling_rate
from devicepipe.io.wfdb_plain import plain_header


class WfdbFormat(FileFormat):
    name: ClassVar[str] = "wfdb"
    described: ClassVar[str] = "a WFDB record (.hea/.dat)"
    names_records: ClassVar[bool] = True
    suffixes: ClassVar[tuple[str, ...]] = (".hea",)  # (a record is also named without a suffix: see probe)
    label: ClassVar[str] = "WFDB record"

    def probe(self, path: Path) -> bool:
        return is_wfdb_record(path)

    def read(self, path: Path, request: ReadRequest) -> RawSeries:
        return read_wfdb(path, request.column, request.span.start, request.span.stop)

    def sampling_rate(self, path: Path, column: ColumnSpec = None) -> float | None:
        return wfdb_sampling_rate(path)

    def declares_rate(self, path: Path) -> bool | None:
        return True

    def length(self, path: Path, column: ColumnSpec = None) -> int:
        wfdb = import_wfdb()  # (imported where it is needed: see devicepipe.io.wfdb)
        head = plain_header(record_base(path))
        length = head.length if head is not None else wfdb.rdheader(str(record_base(path))).sig_len
        if length is None:  # (a record line wfdb could not parse: read_wfdb says more)
            raise ReadError(f"the header of {record_base(path).name} does not say how many samples it holds.")
        return int(length)

    def files(self, path: Path) -> list[Path]:
        base = record_base(path)
        return [base.with_name(base.name + ext) for ext in (".hea", ".dat")]
