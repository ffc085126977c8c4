"""NumPy arrays (``.npy``): ``(time,)``, ``(channels, time)`` or ``(time, channels)``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from devicepipe.core.device import resolve_device
from devicepipe.core.errors import ReadError
from devicepipe.core.interop import convert
from devicepipe.io.formats.base import WHOLE, FileFormat, ReadRequest, Span
from devicepipe.io.raw import ColumnSpec, RawSeries, channel_names, column_list, resolve_names

#: The suffix of a NumPy array file.
NPY_SUFFIXES = (".npy",)
_NUMERIC_INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)


def npy_error(path: Path, exc: BaseException) -> ReadError:
    """The one-line error for an ``.npy`` file numpy cannot load (``exc``: numpy's exception)."""
    # numpy calls a file that is not an array "pickled (object) data" and offers to run it
    text = str(exc)
    if "Object arrays" in text or "Python objects in dtype" in text:  # an array of Python objects
        why = "it holds Python objects (dtype object), which are read only by unpickling, not numbers"
    else:
        why = "not an .npy header" if "pickle" in text else text
    return ReadError(f"{path.name} is not a readable .npy array of numbers ({why}).")


def npy_time_first(shape: tuple[int, ...]) -> bool:
    """Whether a 2-D NPY array of this shape holds ``(time, channels)``: more rows than columns.
    A recording has far more samples than channels, so an array saved with its samples down the
    rows (``np.stack(leads, axis=1)``, a DataFrame's ``to_numpy()``) is read with them along
    time, not as thousands of channels of a few samples."""
    return len(shape) == 2 and shape[0] > shape[1]


def _read_npy(path: Path, column: ColumnSpec, span: Span = WHOLE) -> RawSeries:
    try:
        arr = np.load(path, allow_pickle=False, mmap_mode="r" if span != Span() else None)
    except (ValueError, OSError, EOFError) as exc:
        raise npy_error(path, exc) from None
    if npy_time_first(arr.shape):
        arr = np.ascontiguousarray(arr.T) if span == Span() else arr.T  # (channels, time)
    if span != Span():  # only the part asked for leaves the disk
        arr = np.array(arr[..., span.start : span.stop])
    return from_array(arr, column, path.name)


def from_array(arr: Any, column: ColumnSpec, source: str) -> RawSeries:
    """An array in devicepipe's layout, ``(time,)`` or ``(channels, time)``, shared where possible."""
    if isinstance(arr, (str, bytes)):  # (a path given as bytes, or text: neither is an array)
        raise ReadError(
            f"read_series(): cannot read {type(arr).__name__}; pass a path (str or pathlib.Path) or an array."
        )
    tensor = convert(arr, where="read_series()").tensor
    if tensor.ndim not in (1, 2):
        raise ReadError(
            f"read_series(): {source} has shape {tuple(tensor.shape)}; expected (time,) or (channels, time)."
        )
    if not (tensor.dtype.is_floating_point or tensor.dtype in _NUMERIC_INTS):
        kind = "complex numbers" if tensor.dtype.is_complex else str(tensor.dtype).removeprefix("torch.")
        raise ReadError(
            f"read_series(): {source} holds {kind}, not real numbers; save the signal as float32, float64 "
            "or integers (a complex array's real or imaginary part, e.g. np.real(x))."
        )
    tensor = tensor.unsqueeze(0) if tensor.ndim == 1 else tensor
    names = channel_names(tensor.shape[0])
    wanted = column_list(column)
    if wanted is not None:
        idx = resolve_names(wanted, names, "channel", source)
        tensor, names = tensor[idx], [names[i] for i in idx]
    return RawSeries(tensor, names, [None] * len(names), None, None, source)


def npy_header(path: Path) -> tuple[tuple[int, ...], bool, np.dtype, int]:
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
    if path.suffix.lower() not in NPY_SUFFIXES:
        return None
    try:
        shape, fortran, stored, offset = npy_header(path)
    except (OSError, ValueError, EOFError):
        return None  # read_series says what is wrong with it
    if fortran or len(shape) not in (1, 2) or npy_time_first(shape) or stored.kind not in "fiu" or not stored.isnative:
        return None  # (a (time, channels) array's channel is strided: read_series reads it)
    names = channel_names(shape[0] if len(shape) == 2 else 1)
    wanted = resolve_names(column_list(column) or [0], names, "channel", path.name)  # (None: the first, as chunks read)
    if len(wanted) != 1:
        return None
    n = shape[-1]
    first = offset + wanted[0] * n * stored.itemsize
    target = resolve_device(device)

    def read(start: int, stop: int) -> torch.Tensor:
        values = np.fromfile(path, dtype=stored, count=stop - start, offset=first + start * stored.itemsize)
        return torch.from_numpy(values).to(device=target, dtype=dtype)

    return read


class NpyFormat(FileFormat):
    name: ClassVar[str] = "npy"
    suffixes: ClassVar[tuple[str, ...]] = NPY_SUFFIXES
    described: ClassVar[str] = ".npy"
    label: ClassVar[str] = "NPY"

    def read(self, path: Path, request: ReadRequest) -> RawSeries:
        if request.time_column is not None:
            raise ReadError(f"read_series(): {path.name} is an array file and has no time column.")
        return _read_npy(path, request.column, request.span)

    def length(self, path: Path, column: ColumnSpec = None) -> int:
        try:
            shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
            return int(shape[0] if npy_time_first(shape) else shape[-1])
        except (ValueError, EOFError) as exc:
            raise npy_error(path, exc) from None

    def chunk_reader(
        self, path: Path, column: ColumnSpec, device: str | torch.device, dtype: torch.dtype
    ) -> Callable[[int, int], torch.Tensor] | None:
        return _npy_reader(path, column, device, dtype)
