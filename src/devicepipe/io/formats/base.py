"""What a recording file format is to devicepipe: the :class:`Format` protocol, and
:class:`FileFormat`, its defaults for a format of one file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

import torch

from devicepipe.core.errors import ReadError
from devicepipe.io.raw import ColumnSpec, RawSeries

__all__ = ["WHOLE", "FileFormat", "Format", "ReadRequest", "Span"]


@dataclass(frozen=True)
class Span:
    """Samples ``[start, stop)`` of a recording (``stop`` None: to the end)."""

    start: int = 0
    stop: int | None = None


#: The whole recording.
WHOLE = Span()


@dataclass(frozen=True)
class ReadRequest:
    """What :func:`devicepipe.io.read_series` asks a format to read from a file."""

    column: ColumnSpec = None  # channels or columns, by name or position (None: all)
    time_column: str | int | None = None  # a table's column of timestamps
    time_format: str | None = None  # how those timestamps are written (strptime codes)
    header: bool | None = None  # whether a text table's first line names its columns (None: detect)
    encoding: str | None = None  # a text table's encoding (None: UTF-8, or UTF-16 by its mark)
    span: Span = WHOLE  # the samples asked for


class Format(Protocol):
    """A recording file format: one module of :mod:`devicepipe.io.formats`, one line in its
    ``FORMATS``. The first format whose :meth:`probe` takes a path reads it."""

    name: ClassVar[str]  # what the user calls it ("csv", "wfdb", ...)
    described: ClassVar[str]  # how the error for an unknown format lists it, e.g. ".npy"
    names_records: ClassVar[bool]  # True: a path may name a record of several files, not a file (WFDB)
    # the suffixes of the files that name a recording: a folder's recordings are the files ending
    # in one of any format's (a WFDB record by its header)
    suffixes: ClassVar[tuple[str, ...]]
    label: ClassVar[str]  # how the commands' help lists it ("" where another format's label covers it)

    def probe(self, path: Path) -> bool:
        """Whether this format reads ``path``, from its name (and, where a format needs it, its
        first bytes); never raises for a missing or unreadable file."""
        ...

    def read(self, path: Path, request: ReadRequest) -> RawSeries:
        """The samples ``request`` asks for (:class:`~devicepipe.io.raw.RawSeries`, on the host)."""
        ...

    def sampling_rate(self, path: Path, column: ColumnSpec = None) -> float | None:
        """The rate (Hz) the file states, read without its samples; None where it states none."""
        ...

    def declares_rate(self, path: Path) -> bool | None:
        """Whether the file states its rate (None: only reading tells)."""
        ...

    def length(self, path: Path, column: ColumnSpec = None) -> int:
        """Samples in the recording, for reading it in chunks (from a header where there is one)."""
        ...

    def samples_at_most(self, path: Path, column: ColumnSpec = None) -> int:
        """An upper bound of :meth:`length` found without a pass over the file."""
        ...

    def files(self, path: Path) -> list[Path]:
        """The files that hold the recording ``path`` names (whether or not they exist)."""
        ...

    def chunk_reader(
        self, path: Path, column: ColumnSpec, device: str | torch.device, dtype: torch.dtype
    ) -> Callable[[int, int], torch.Tensor] | None:
        """A reader of one channel's samples ``[start, stop)`` faster than
        :func:`~devicepipe.io.read_series` per chunk, or None (read_series reads each chunk)."""
        ...


class FileFormat:
    """Defaults for a format of one file found by its suffix: no stated rate, no chunked reading
    (a subclass that can read in chunks defines :meth:`length`)."""

    name: ClassVar[str] = ""
    suffixes: ClassVar[tuple[str, ...]] = ()
    described: ClassVar[str] = ""
    names_records: ClassVar[bool] = False
    label: ClassVar[str] = ""

    def probe(self, path: Path) -> bool:
        return path.suffix.lower() in self.suffixes

    def sampling_rate(self, path: Path, column: ColumnSpec = None) -> float | None:
        return None

    def declares_rate(self, path: Path) -> bool | None:
        return False

    def length(self, path: Path, column: ColumnSpec = None) -> int:
        raise ReadError(f"cannot read {path.name} in chunks; use a WFDB record, EDF, Parquet, NPY or CSV file.")

    def samples_at_most(self, path: Path, column: ColumnSpec = None) -> int:
        return self.length(path, column)

    def files(self, path: Path) -> list[Path]:
        return [path]

    def chunk_reader(
        self, path: Path, column: ColumnSpec, device: str | torch.device, dtype: torch.dtype
    ) -> Callable[[int, int], torch.Tensor] | None:
        return None
