"""Recordings longer than memory: their length without reading them, and their samples a chunk at a time.

:func:`recording_length` reads only headers and footers (WFDB, EDF, Parquet, NPY; a CSV is
counted by streaming it once). :func:`iter_chunks` yields consecutive chunks with a halo of
samples either side, each read with :func:`~devicepipe.io.read_series`'s ``start``/``stop``
(only that part leaves the disk where the format allows).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch

from devicepipe.device import resolve_device
from devicepipe.errors import ReadError
from devicepipe.io.edf import EDF_SUFFIXES, edf_header
from devicepipe.io.raw import ColumnSpec, channel_names, column_list, resolve_names
from devicepipe.io.read import header_sampling_rate, npy_error, npy_time_first, read_series
from devicepipe.io.tables import CSV_DELIMITERS, PARQUET_SUFFIXES, csv_rows
from devicepipe.io.wfdb import is_wfdb_record, record_base

__all__ = ["Chunk", "chunk_reader", "iter_chunks", "npy_rows", "recording_length", "samples_at_most"]


def recording_length(source: str | os.PathLike[str], column: ColumnSpec = None) -> int:
    """Samples in a recording file, from its header where it has one (a CSV's rows are counted
    in one streamed pass, its values not converted)."""
    path = Path(source)
    suffix = path.suffix.lower()
    try:
        if is_wfdb_record(path):
            import wfdb  # (imported where it is needed: see devicepipe.io.wfdb)

            return int(wfdb.rdheader(str(record_base(path))).sig_len)
        if suffix in EDF_SUFFIXES:
            head = edf_header(path)
            wanted = column_list(column)
            idx = list(range(len(head["labels"]))) if wanted is None else resolve_names(
                wanted, head["labels"], "signal", path.name
            )  # fmt: skip
            return min(head["lengths"][i] for i in idx)
        if suffix in PARQUET_SUFFIXES:
            return int(pq.ParquetFile(path).metadata.num_rows)
        if suffix == ".npy":
            try:
                shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
                return int(shape[0] if npy_time_first(shape) else shape[-1])
            except (ValueError, EOFError) as exc:
                raise npy_error(path, exc) from None
        if suffix in CSV_DELIMITERS:
            return csv_rows(path)
    except ReadError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader's failure, as one line
        raise ReadError(f"cannot read the length of {path.name} ({exc}).") from None
    raise ReadError(f"cannot read {path.name} in chunks; use a WFDB record, EDF, Parquet, NPY or CSV file.")


def samples_at_most(source: str | os.PathLike[str], column: ColumnSpec = None) -> int:
    """An upper bound of :func:`recording_length` found without a pass over the file: the length
    itself where a header says it; for a CSV, its size in bytes over two (a row holds a value
    and a line end at least), so that a file plainly small enough is not read to be counted."""
    path = Path(source)
    if path.suffix.lower() in CSV_DELIMITERS and path.is_file():
        return path.stat().st_size // 2
    return recording_length(source, column)


def chunk_reader(
    source: str | os.PathLike[str],
    column: ColumnSpec = None,
    *,
    sampling_rate: float | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    encoding: str | None = None,
) -> tuple[Callable[[int, int], torch.Tensor], int, float]:
    """``read(start, stop)`` (samples ``[start, stop)`` of one channel as a ``(time,)`` tensor on
    ``device``), the recording's length and its rate (Hz): what
    :func:`devicepipe.ecg.ecg_peaks_chunked` takes."""
    rate = sampling_rate or header_sampling_rate(Path(source), column)
    if rate is None:
        raise ReadError(
            f"the sampling rate of {Path(source).name} is unknown; pass sampling_rate=HZ.",
            cli=f"the sampling rate of {Path(source).name} is unknown; pass --sampling-rate HZ.",
        )
    n = recording_length(source, column)
    chosen = 0 if column is None else column
    fast = _npy_reader(Path(source), chosen, device, dtype)
    if fast is not None:
        return fast, n, float(rate)

    def read(start: int, stop: int) -> torch.Tensor:
        rec = read_series(
            source, chosen, start=start, stop=stop, sampling_rate=rate, device=device, dtype=dtype, encoding=encoding
        )
        return rec.samples

    return read, n, float(rate)


@dataclass(frozen=True)
class Chunk:
    """Samples ``[start, stop)`` of a recording (``samples``: shape ``(time,)`` or ``(channels,
    time)``), whose own part is ``[core_start, core_stop)``; the rest is halo from its neighbours."""

    samples: torch.Tensor
    start: int
    stop: int
    core_start: int
    core_stop: int
    sampling_rate: float

    @property
    def core(self) -> torch.Tensor:
        """The chunk's own samples, without the halo."""
        return self.samples[..., self.core_start - self.start : self.core_stop - self.start]


def iter_chunks(
    source: str | os.PathLike[str],
    *,
    chunk_s: float,
    halo_s: float = 0.0,
    column: ColumnSpec = None,
    sampling_rate: float | None = None,
    device: str | torch.device = "cpu",
    **read_options: Any,
) -> Iterator[Chunk]:
    """Consecutive chunks of ``chunk_s`` seconds of a recording file, each with ``halo_s``
    seconds of its neighbours either side (cut at the recording's ends); the cores tile the
    recording exactly. ``read_options`` go to :func:`~devicepipe.io.read_series`."""
    if not chunk_s > 0 or not halo_s >= 0:
        raise ReadError(f"iter_chunks(): chunk_s must be positive and halo_s not negative, got {chunk_s}, {halo_s}.")
    rate = sampling_rate or header_sampling_rate(Path(source), column)
    if rate is None:
        raise ReadError(f"iter_chunks(): the sampling rate of {Path(source).name} is unknown; pass sampling_rate=.")
    n = recording_length(source, column)
    size, halo = max(1, round(chunk_s * rate)), round(halo_s * rate)
    for c0 in range(0, n, size):
        c1 = min(n, c0 + size)
        a, b = max(0, c0 - halo), min(n, c1 + halo)
        rec = read_series(source, column, start=a, stop=b, sampling_rate=rate, device=device, **read_options)
        yield Chunk(rec.samples, a, b, c0, c1, float(rate))


def _npy_header(path: Path) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """An NPY file's shape, Fortran order, dtype and the byte offset of its data."""
    with path.open("rb") as fh:
        version = np.lib.format.read_magic(fh)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = header(fh)
        return shape, fortran, dtype, fh.tell()


def _npy_reader(
    path: Path, column: ColumnSpec, device: str | torch.device, dtype: torch.dtype
) -> Callable[[int, int], torch.Tensor] | None:
    """A chunk reader of one channel of a ``(time,)`` or C-ordered ``(channels, time)`` NPY file
    of native-order numbers, its header read once and each chunk by a positioned read (what
    :func:`~devicepipe.io.read_series` does per call, header and mapping included, was a
    quarter of a 10-minute chunk's time); None for any other file, which read_series reads."""
    if path.suffix.lower() != ".npy":
        return None
    try:
        shape, fortran, stored, offset = _npy_header(path)
    except (OSError, ValueError, EOFError):
        return None  # read_series says what is wrong with it
    if fortran or len(shape) not in (1, 2) or npy_time_first(shape) or stored.kind not in "fiu" or not stored.isnative:
        return None  # (a (time, channels) array's channel is strided: read_series reads it)
    names = channel_names(shape[0] if len(shape) == 2 else 1)
    wanted = resolve_names(column_list(column), names, "channel", path.name)
    if len(wanted) != 1:
        return None
    n = shape[-1]
    first = offset + wanted[0] * n * stored.itemsize
    target = resolve_device(device)

    def read(start: int, stop: int) -> torch.Tensor:
        values = np.fromfile(path, dtype=stored, count=stop - start, offset=first + start * stored.itemsize)
        return torch.from_numpy(values).to(device=target, dtype=dtype)

    return read


def npy_rows(path: Path) -> tuple[int, int, Callable[[Sequence[tuple[int, int]]], torch.Tensor]]:
    """Rows, columns and a reader ``rows([(start, stop), ...])`` of a 2-D NPY file, read with
    positioned reads: nothing of the file stays mapped, so the memory held is the rows asked for."""
    (n, width), _, dtype, offset = _npy_header(path)
    row = width * dtype.itemsize

    def rows(picks: Sequence[tuple[int, int]]) -> torch.Tensor:
        """The rows ``[start, stop)`` of each pick, one after the other."""
        out = np.empty((sum(stop - start for start, stop in picks), width), dtype=dtype)
        done = 0
        with path.open("rb") as fh:
            for start, stop in picks:  # each read straight into its place: no parts to join
                fh.seek(offset + start * row)
                got = fh.readinto(memoryview(out[done : done + stop - start]).cast("B"))
                if got != (stop - start) * row:
                    raise ReadError(f"{path} ends before row {stop:,}: the file is cut short.")
                done += stop - start
        return torch.from_numpy(out)

    return n, width, rows
