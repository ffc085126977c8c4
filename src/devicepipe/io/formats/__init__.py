"""Recording file formats, one module each behind the :class:`~.base.Format` protocol.

:data:`FORMATS` lists them in the order they are tried: the first whose ``probe`` takes a path
reads it (a WFDB record first, since it may be named without a suffix). A new format is one
module here and one line in :data:`FORMATS`; :func:`devicepipe.io.read_series`, chunked reading,
the stated sampling rate and a run's input fingerprint all go through this list.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pyarrow as pa

from devicepipe.core.errors import DevicepipeError, ReadError
from devicepipe.io.formats.base import FileFormat, Format, ReadRequest, Span
from devicepipe.io.formats.csv import CsvFormat
from devicepipe.io.formats.edf import EdfFormat
from devicepipe.io.formats.npy import NpyFormat
from devicepipe.io.formats.parquet import ParquetFormat
from devicepipe.io.formats.rate_tsv import RateTsvFormat
from devicepipe.io.formats.wfdb import WfdbFormat

__all__ = [
    "FORMATS",
    "FORMAT_LABELS",
    "RECORDING_SUFFIXES",
    "FileFormat",
    "Format",
    "ReadRequest",
    "Span",
    "format_of",
    "known_formats",
]

#: Every format devicepipe reads, in the order their probes are tried.
FORMATS: tuple[Format, ...] = (
    WfdbFormat(),
    RateTsvFormat(),
    CsvFormat(),
    ParquetFormat(),
    NpyFormat(),
    EdfFormat(),
)
#: The suffixes of the files that name a recording, every format's: what a folder's recordings end in.
#: (The labelled formats' first: a .tsv is a CSV/TSV before it is a rate-stating TSV.)
RECORDING_SUFFIXES: tuple[str, ...] = tuple(
    dict.fromkeys(s for fmt in sorted(FORMATS, key=lambda f: not f.label) for s in fmt.suffixes)
)
#: The formats as the commands' help lists them ("CSV/TSV, Parquet, ...").
FORMAT_LABELS = ", ".join(fmt.label for fmt in sorted(FORMATS, key=lambda f: f.names_records) if fmt.label)


def format_of(path: Path) -> Format | None:
    """The first of :data:`FORMATS` that reads ``path``, or None; guarded (:class:`Guarded`), so
    that every probe of a file (its rate, length, channels) fails as its read does: in one line."""
    fmt = next((fmt for fmt in FORMATS if fmt.probe(path)), None)
    return None if fmt is None else cast(Format, Guarded(fmt))  # (a proxy: every call the format's own)


#: What the libraries formats read with raise for a file that is not what its name says (damaged,
#: cut short, empty, in another format): said as a :class:`~devicepipe.core.errors.ReadError`. A
#: TypeError or AttributeError is no file's fault, and is left to be seen.
FILE_FAULTS = (OSError, ValueError, IndexError, KeyError, EOFError, LookupError, pa.ArrowException)


class Guarded:
    """A :class:`Format` whose every call (and every reader one returns) turns an error of the
    library it reads with (:data:`FILE_FAULTS`) into one line naming the file and the format."""

    def __init__(self, fmt: Format) -> None:
        self._fmt = fmt

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._fmt, name)
        return _guarded(value, self._fmt) if callable(value) and name != "probe" else value


def _guarded(call: Callable[..., Any], fmt: Format) -> Callable[..., Any]:
    @functools.wraps(call)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            out = call(*args, **kwargs)
        except DevicepipeError:
            raise
        except FILE_FAULTS as exc:
            path = next((a for a in args if isinstance(a, Path)), None)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            what = "the recording" if path is None else path.name
            raise ReadError(
                f"cannot read {what} as {fmt.described} ({first}); is the file whole, and of that format?"
            ) from None
        return _guarded(out, fmt) if callable(out) else out

    return guarded


def known_formats() -> str:
    """The formats, as the error for an unknown one lists them: ``".csv, .tsv, ... or a WFDB record"``."""
    # plain suffixes first, then formats told apart by more than a suffix (in the order tried)
    files = [f.described for f in FORMATS if not f.names_records]
    files.sort(key=lambda d: any(not word.startswith(".") for word in d.replace(",", " ").split()))
    records = [f.described for f in FORMATS if f.names_records]
    return ", ".join(files) + "".join(f" or {r}" for r in records)
