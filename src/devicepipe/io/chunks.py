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
import torch

from devicepipe.core.errors import ReadError
from devicepipe.io.formats import format_of
from devicepipe.io.formats.npy import npy_header
from devicepipe.io.raw import ColumnSpec
from devicepipe.io.read import OverrideRate, check_encoding, chosen_rate, header_sampling_rate, read_series

__all__ = ["Chunk", "chunk_reader", "iter_chunks", "npy_rows", "recording_length", "samples_at_most"]


def recording_length(source: str | os.PathLike[str], column: ColumnSpec = None) -> int:
    """Samples in a recording file, from its header where it has one (a CSV's rows are counted
    in one streamed pass, its values not converted)."""
    path = Path(source)
    fmt = format_of(path)
    if fmt is None:
        raise ReadError(f"cannot read {path.name} in chunks; use a WFDB record, EDF, Parquet, NPY or CSV file.")
    try:
        return fmt.length(path, column)
    except ReadError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader's failure, as one line
        raise ReadError(f"cannot read the length of {path.name} ({exc}).") from None


def samples_at_most(source: str | os.PathLike[str], column: ColumnSpec = None) -> int:
    """An upper bound of :func:`recording_length` found without a pass over the file: the length
    itself where a header says it; for a CSV, its size in bytes over two (a row holds a value
    and a line end at least), so that a file plainly small enough is not read to be counted."""
    path = Path(source)
    fmt = format_of(path)
    return fmt.samples_at_most(path, column) if fmt is not None else recording_length(source, column)


def chunk_reader(
    source: str | os.PathLike[str],
    column: ColumnSpec = None,
    *,
    sampling_rate: float | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    encoding: str | None = None,
    override_rate: bool = False,
) -> tuple[Callable[[int, int], torch.Tensor], int, float]:
    """``read(start, stop)`` (samples ``[start, stop)`` of one channel as a ``(time,)`` tensor on
    ``device``), the recording's length and its rate (Hz): what
    :func:`devicepipe.ecg.ecg_peaks_chunked` takes."""
    check_encoding(encoding)
    rate = chosen_rate(sampling_rate, header_sampling_rate(Path(source), column), Path(source).name, override_rate)
    if rate is None:
        raise ReadError(
            f"the sampling rate of {Path(source).name} is unknown",
            fix="pass {sampling_rate=HZ}.",
            param="sampling_rate",
        )
    n = recording_length(source, column)
    chosen = 0 if column is None else column
    fmt = format_of(Path(source))
    fast = None if fmt is None else fmt.chunk_reader(Path(source), chosen, device, dtype)
    rate = rate if isinstance(rate, OverrideRate) else float(rate)  # (an override stays one, for what reads on)
    if fast is not None:
        return fast, n, rate

    def read(start: int, stop: int) -> torch.Tensor:
        rec = read_series(
            source, chosen, start=start, stop=stop, sampling_rate=rate, device=device, dtype=dtype,
            encoding=encoding, override_rate=override_rate,
        )  # fmt: skip
        return rec.samples

    return read, n, rate


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
    override = bool(read_options.get("override_rate", False))
    rate = chosen_rate(sampling_rate, header_sampling_rate(Path(source), column), Path(source).name, override)
    if rate is None:
        raise ReadError(f"iter_chunks(): the sampling rate of {Path(source).name} is unknown; pass sampling_rate=.")
    n = recording_length(source, column)
    size, halo = max(1, round(chunk_s * rate)), round(halo_s * rate)
    for c0 in range(0, n, size):
        c1 = min(n, c0 + size)
        a, b = max(0, c0 - halo), min(n, c1 + halo)
        rec = read_series(source, column, start=a, stop=b, sampling_rate=rate, device=device, **read_options)
        yield Chunk(rec.samples, a, b, c0, c1, float(rate))


def npy_rows(path: Path) -> tuple[int, int, Callable[[Sequence[tuple[int, int]]], torch.Tensor]]:
    """Rows, columns and a reader ``rows([(start, stop), ...])`` of a 2-D NPY file, read with
    positioned reads: nothing of the file stays mapped, so the memory held is the rows asked for."""
    (n, width), _, dtype, offset = npy_header(path)
    row = width * dtype.itemsize

    def rows(picks: Sequence[tuple[int, int]]) -> torch.Tensor:
        """The rows ``[start, stop)`` of each pick, one after the other."""
        out = np.empty((sum(stop - start for start, stop in picks), width), dtype=dtype)
        done = 0
        with path.open("rb") as fh:
            for start, stop in picks:  # each read straight into its place: no parts to join
                fh.seek(offset + start * row)
                got = fh.readinto(out[done : done + stop - start].data.cast("B"))
                if got != (stop - start) * row:
                    raise ReadError(f"{path} ends before row {stop:,}: the file is cut short.")
                done += stop - start
        return torch.from_numpy(out)

    return n, width, rows
