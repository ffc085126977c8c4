"""Recording file formats, one module each behind the :class:`~.base.Format` protocol.

:data:`FORMATS` lists them in the order they are tried: the first whose ``probe`` takes a path
reads it (a WFDB record first, since it may be named without a suffix). A new format is one
module here and one line in :data:`FORMATS`; :func:`devicepipe.io.read_series`, chunked reading,
the stated sampling rate and a run's input fingerprint all go through this list.
"""

from __future__ import annotations

from pathlib import Path

from devicepipe.io.formats.base import FileFormat, Format, ReadRequest, Span
from devicepipe.io.formats.csv import CsvFormat
from devicepipe.io.formats.edf import EdfFormat
from devicepipe.io.formats.npy import NpyFormat
from devicepipe.io.formats.parquet import ParquetFormat
from devicepipe.io.formats.rate_tsv import RateTsvFormat
from devicepipe.io.formats.wfdb import WfdbFormat

__all__ = ["FORMATS", "FileFormat", "Format", "ReadRequest", "Span", "format_of", "known_formats"]

#: Every format devicepipe reads, in the order their probes are tried.
FORMATS: tuple[Format, ...] = (
    WfdbFormat(),
    RateTsvFormat(),
    CsvFormat(),
    ParquetFormat(),
    NpyFormat(),
    EdfFormat(),
)


def format_of(path: Path) -> Format | None:
    """The first of :data:`FORMATS` that reads ``path``, or None."""
    return next((fmt for fmt in FORMATS if fmt.probe(path)), None)


def known_formats() -> str:
    """The formats, as the error for an unknown one lists them: ``".csv, .tsv, ... or a WFDB record"``."""
    # plain suffixes first, then formats told apart by more than a suffix (in the order tried)
    files = [f.described for f in FORMATS if not f.names_records]
    files.sort(key=lambda d: any(not word.startswith(".") for word in d.replace(",", " ").split()))
    records = [f.described for f in FORMATS if f.names_records]
    return ", ".join(files) + "".join(f" or {r}" for r in records)
