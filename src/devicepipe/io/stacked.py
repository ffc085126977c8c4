"""Many short recordings of one length and rate read into one ``(records, ...)`` tensor:
:func:`read_stacked`.

A folder of 10-s records (CPSC 2019's, PTB-XL's) is read to be detected or learned from
together, in one batched call. Read one :func:`~devicepipe.io.read_series` call at a time, each
record pays the fixed work of one call (the format table, the guarded read, the checks, a
:class:`~devicepipe.io.Recording` of its own), which on such records costs as much as their
detection. Here the plain WFDB records among them (:mod:`devicepipe.io.wfdb_plain`: most
records) are read with the least work there is: the header parsed, the stored samples read by
``np.fromfile``, and every record converted to physical units at once, by the steps of
``wfdb.Record.dac`` applied to the stack (each value is computed as for its record alone, so the
values equal :func:`~devicepipe.io.read_series`'s bit for bit); so are ``.npy`` arrays of float32
or float64 given a sampling rate (their header, then one ``np.fromfile``). Every other recording
(another format, a record that is not plain, one with missing samples, whose NaN policy
decides) is read by :func:`~devicepipe.io.read_series` itself, with the same options.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from devicepipe.core.device import resolve_device
from devicepipe.core.errors import ReadError
from devicepipe.io.formats.npy import NPY_SUFFIXES, npy_header, npy_time_first
from devicepipe.io.raw import ColumnSpec, channel_names, column_list, resolve_names
from devicepipe.io.read import check_read_options, chosen_rate, read_series
from devicepipe.io.timeline import NanPolicy
from devicepipe.io.wfdb import WFDB_SUFFIXES
from devicepipe.io.wfdb_plain import PlainHeader, missing_samples, physical, plain_header, stored_frames

__all__ = ["StackedRecordings", "read_stacked"]

#: The ``.npy`` element types read directly (native byte order): every other one by read_series.
_NPY_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class StackedRecordings:
    """Recordings of one length, rate and set of channels, stacked.

    Attributes
    ----------
    samples : Tensor of shape ``(records, time)`` (one channel) or ``(records, channels, time)``,
        on the requested device; row ``i`` is ``sources[i]``.
    sampling_rate : Hz, every record's.
    channels : the channels read, by name (the first record's names).
    sources : each record's name, in the order given.
    """

    samples: torch.Tensor
    sampling_rate: float
    channels: tuple[str, ...]
    sources: tuple[str, ...]

    @property
    def n_records(self) -> int:
        return int(self.samples.shape[0])

    @property
    def n_samples(self) -> int:
        return int(self.samples.shape[-1])


@dataclass(frozen=True)
class _Read:
    """One record as read: float32 ``(channels, time)`` values on the host, rate, names, name."""

    values: np.ndarray
    fs: float
    names: tuple[str, ...]
    source: str


def read_stacked(
    sources: Sequence[str | os.PathLike[str]],
    column: ColumnSpec = None,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    sampling_rate: float | None = None,
    nan: NanPolicy = "error",
) -> StackedRecordings:
    """Read the recordings ``sources`` (paths, any format :func:`~devicepipe.io.read_series`
    reads) into one tensor: for a folder of short records detected or learned from together.

    Parameters
    ----------
    sources : the recordings, in the order of the rows.
    column, sampling_rate, nan : as :func:`~devicepipe.io.read_series` takes them, for every record.
    device, dtype : where the stack is put, and its floating type.

    Returns
    -------
    :class:`StackedRecordings`: ``samples`` ``(records, time)`` or ``(records, channels, time)``.
    Records of another length, rate or number of channels than the first are refused with one
    line naming the first such record (read them one by one with ``read_series``, or cut them to
    one length with its ``start``/``stop``).
    """
    if isinstance(sources, (str, os.PathLike)) or not len(sources):
        raise ReadError(
            "read_stacked(): sources must be a list of one or more recordings",
            fix="pass the paths in a list (one recording: read_series).",
            param="sources",
        )
    check_read_options(column, None, nan, "keep", dtype, sampling_rate)
    target = resolve_device(device)
    wanted = column_list(column)
    reads = [_read_one(os.fspath(s), column, wanted, sampling_rate, nan) for s in sources]
    first = reads[0]
    for r in reads[1:]:
        _check_alike(first, r)
    stack = np.stack([r.values for r in reads])  # (records, channels, time) float32
    samples = torch.from_numpy(stack[:, 0] if stack.shape[1] == 1 else stack).to(device=target, dtype=dtype)
    return StackedRecordings(samples, first.fs, first.names, tuple(r.source for r in reads))


def _read_one(
    path: str, column: ColumnSpec, wanted: list[str | int] | None, sampling_rate: float | None, nan: NanPolicy
) -> _Read:
    """One recording: a plain WFDB record (named by one of its files, or by its name) read directly, anything else
    by read_series (the paths handled as strings: a path object's every step costs as much as a
    short record's header)."""
    base, suffix = os.path.splitext(path)
    if suffix.lower() not in WFDB_SUFFIXES:  # a record named without a suffix (``mitdb/100``), as read_series takes it
        base = path if not os.path.exists(path) and os.path.exists(path + ".hea") else ""
    head = plain_header(base) if base else None
    if head is not None:
        name = os.path.basename(base)
        every = list(range(len(head.names)))
        chosen = every if wanted is None else resolve_names(wanted, head.names, "channel", name)
        values = _plain_values(head, chosen)
        if values is not None:
            fs = chosen_rate(sampling_rate, head.fs, name)
            assert fs is not None  # (a plain header states its rate)
            return _Read(values, float(fs), tuple(head.names[c] for c in chosen), name)
    if suffix.lower() in NPY_SUFFIXES and sampling_rate is not None:
        array = _npy_values(path, wanted)
        if array is not None:
            return _Read(array[0], float(sampling_rate), array[1], os.path.basename(path))
    rec = read_series(path, column, device="cpu", sampling_rate=sampling_rate, nan=nan)
    values = (rec.samples[None] if rec.samples.ndim == 1 else rec.samples).numpy()
    return _Read(values, rec.fs, rec.channels, rec.source)


def _npy_values(path: str, wanted: list[str | int] | None) -> tuple[np.ndarray, tuple[str, ...]] | None:
    """A float32 or float64 ``.npy`` array, ``(time,)``, ``(channels, time)`` or ``(time, channels)``
    (:func:`~devicepipe.io.formats.npy.npy_time_first`), as float32 ``(channels, time)`` values,
    its channels ``wanted`` (``ch0``, ``ch1``, ... as read_series names them), read with its
    header and one ``np.fromfile``; None for any other array, one holding NaN or inf (read_series'
    NaN policy decides) or a file that does not hold what its header says (read_series says
    what is wrong)."""
    try:
        shape, fortran, stored, offset = npy_header(Path(path))
    except (OSError, ValueError, EOFError):
        return None
    if fortran or len(shape) not in (1, 2) or stored not in _NPY_FLOATS or not math.prod(shape):
        return None
    values = np.fromfile(path, dtype=stored, count=math.prod(shape), offset=offset)
    if values.size != math.prod(shape):
        return None
    values = values.reshape(shape)
    values = values.T if npy_time_first(shape) else values.reshape(-1, shape[-1])
    names = channel_names(values.shape[0])
    if wanted is not None:
        chosen = resolve_names(wanted, names, "channel", os.path.basename(path))
        values, names = values[chosen], [names[i] for i in chosen]
    values = np.ascontiguousarray(values, dtype=np.float32)
    if not np.isfinite(values).all():
        return None
    return values, tuple(names)


def _plain_values(head: PlainHeader, chosen: list[int]) -> np.ndarray | None:
    """A plain record's channels ``chosen`` in physical units, float32 ``(channels, time)``, as
    ``wfdb.Record.dac`` computes them; None where the record holds missing samples (read_series'
    NaN policy decides about those) or its file does not fit its header."""
    digital = stored_frames(head, chosen)
    if digital is None or missing_samples(head, digital) is not None:
        return None
    return physical(head, digital, chosen, None)


def _check_alike(first: _Read, other: _Read) -> None:
    """Refuse a record that cannot share the first one's stack."""
    fix = "read the records one by one with read_series, or pass records of one length, rate and set of channels."
    if other.values.shape[0] != first.values.shape[0]:
        what = f"{other.values.shape[0]} channel(s), where {first.source} has {first.values.shape[0]}"
    elif other.fs != first.fs:
        what = f"a sampling rate of {other.fs:g} Hz, where {first.source} has {first.fs:g} Hz"
    elif other.values.shape[1] != first.values.shape[1]:
        what = f"{other.values.shape[1]:,} samples, where {first.source} has {first.values.shape[1]:,}"
    else:
        return
    raise ReadError(f"read_stacked(): {other.source} has {what}; records are stacked only when alike", fix=fix)
