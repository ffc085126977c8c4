"""Arrays held on disk while a long recording is worked through a part at a time.

A chunked detection gathers a little for each stretch of a recording (block summaries, candidate
beats); over a week of ECG that is tens of megabytes, held in memory for the whole run and
fragmenting the heap between the chunks' working buffers. :class:`Spill` appends each chunk's
arrays to unnamed temporary files instead and reads back any range of them by positioned
reads (no memory map: the file's pages never count in the process's resident size), or maps
one whole (:meth:`Spill.mapped`) for a result handed back.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterator
from types import TracebackType
from typing import Any, BinaryIO, cast

import numpy as np
import torch

from devicepipe.core.errors import DevicepipeError

__all__ = ["Spill", "Stored"]

#: Bytes of a name's appended parts held back and written in one call (small parts come often).
SPILL_BUFFER = 1 << 16


class Spill:
    """Named 1-D arrays appended a part at a time to temporary files, and read back by index range.

    Each name holds one dtype, set by its first :meth:`append`; values come back on the device
    asked for, with the dtype they were appended with. The files are the system's unnamed
    temporary files (``tempfile.TemporaryFile`` in ``TMPDIR``): nothing of them is left on disk
    after :meth:`close` (or a ``with`` block), nor when the process is killed.
    """

    def __init__(self) -> None:
        self._files: dict[str, BinaryIO] = {}
        self._dtypes: dict[str, np.dtype] = {}
        self._sizes: dict[str, int] = {}
        # appended, not yet written: a buffer of SPILL_BUFFER bytes a name, made once (small parts
        # held one by one would lie among the chunks' large buffers and keep the heap in pieces)
        self._buffers: dict[str, bytearray] = {}
        self._filled: dict[str, int] = {}

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the files (the system frees them)."""
        self._buffers.clear()
        for fh in self._files.values():
            fh.close()
        self._files.clear()

    def _new_file(self, name: str) -> BinaryIO:
        """An unnamed temporary file for ``name``, read and written unbuffered (values are
        read back as soon as written, and only ever written at its end)."""
        return tempfile.TemporaryFile("w+b", buffering=0, prefix=f"devicepipe-{name}-")

    def append(self, name: str, values: torch.Tensor) -> None:
        """Add ``values`` (any shape, read flat) to the end of ``name``."""
        host = values.detach().reshape(-1).cpu().numpy()
        if name not in self._files:
            try:
                self._files[name] = self._new_file(name)
            except OSError as exc:
                raise _no_room(exc) from None
            self._dtypes[name], self._sizes[name] = host.dtype, 0
        elif host.dtype != self._dtypes[name]:
            raise TypeError(f"Spill.append(): {name!r} holds {self._dtypes[name]}, not {host.dtype}.")
        data = np.ascontiguousarray(host).data.cast("B")
        self._sizes[name] += host.size
        if name not in self._buffers:
            self._buffers[name] = bytearray(SPILL_BUFFER)
        buffer = self._buffers[name]
        filled = self._filled.get(name, 0)
        if filled + data.nbytes > len(buffer):
            self._write(name)
            filled = 0
        if data.nbytes >= len(buffer):  # a large part: straight to the file
            self._put(name, data)
        else:  # (copied: the caller may change its tensor)
            buffer[filled : filled + data.nbytes] = data
            self._filled[name] = filled + data.nbytes

    def _write(self, name: str) -> None:
        """Write what waits of ``name`` to its file, in one call."""
        filled = self._filled.pop(name, 0)
        if filled:
            self._put(name, memoryview(self._buffers[name])[:filled])

    def _put(self, name: str, data: memoryview) -> None:
        try:
            self._files[name].write(data)
        except OSError as exc:
            raise _no_room(exc) from None

    def size(self, name: str) -> int:
        """Values appended to ``name`` so far (0 for a name never appended to)."""
        return self._sizes.get(name, 0)

    def read(
        self, name: str, start: int = 0, stop: int | None = None, device: torch.device | str = "cpu"
    ) -> torch.Tensor:
        """Values ``[start, stop)`` of ``name`` (``stop`` cut to its size), shape ``(stop - start,)``."""
        size = self.size(name)
        stop = size if stop is None else min(int(stop), size)
        start = min(max(0, int(start)), stop)
        if name not in self._files:
            return torch.zeros(0, device=device)
        self._write(name)
        dtype = self._dtypes[name]
        out = np.empty(stop - start, dtype=dtype)
        view, offset = out.data.cast("B"), start * dtype.itemsize
        while view.nbytes:  # positioned reads, straight into place (all written: no buffer)
            got = _read_at(self._files[name], view, offset)
            if not got:
                raise OSError(f"Spill.read(): {name!r} ends early (its temporary file was changed).")
            view, offset = view[got:], offset + got
        return torch.from_numpy(out).to(device)

    def parts(self, name: str, part: int, device: torch.device | str = "cpu") -> Iterator[torch.Tensor]:
        """``name``'s values ``part`` at a time, in order."""
        for s in range(0, self.size(name), part):
            yield self.read(name, s, s + part, device)

    def mapped(self, name: str) -> np.ndarray:
        """All of ``name`` as a NumPy array ``(size,)`` mapped from its file, copy on write: its
        pages are read (and count in the resident size) only where it is used, and it stays valid
        after :meth:`close` (the system frees the file with the last of its maps)."""
        if name not in self._files:
            raise KeyError(f"Spill.mapped(): nothing was appended to {name!r}.")
        self._write(name)
        dtype, size = self._dtypes[name], self.size(name)
        if size == 0:  # (an empty file cannot be mapped)
            return np.zeros(0, dtype=dtype)
        return np.memmap(self._files[name], dtype=dtype, mode="c", shape=(size,))


def _read_at(fh: BinaryIO, into: memoryview, offset: int) -> int:
    """Bytes read from ``fh``'s file at ``offset`` into ``into``; its writer stays at the end."""
    if hasattr(os, "preadv"):
        return os.preadv(fh.fileno(), [into], offset)
    fh.seek(offset)  # (no positioned reads on this system)
    try:
        return cast(io.RawIOBase, fh).readinto(into) or 0  # (an unbuffered file: raw)
    finally:
        fh.seek(0, os.SEEK_END)


class Stored:
    """One name of a :class:`Spill` seen as a read-only 1-D NumPy array: ``len()``, ``.size``,
    ``.dtype``, ``[i]`` and ``[start:stop]`` read from disk (a slice is a new array)."""

    def __init__(self, spill: Spill, name: str) -> None:
        self.spill, self.name = spill, name

    def __len__(self) -> int:
        return self.spill.size(self.name)

    @property
    def size(self) -> int:
        return len(self)

    @property
    def dtype(self) -> np.dtype:
        return self.spill.read(self.name, 0, 0).numpy().dtype

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                raise IndexError("Stored: slices with a step are not read.")
            return self.spill.read(self.name, start, max(start, stop)).numpy()
        i = int(key) + (len(self) if int(key) < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(f"Stored: index {key} is out of {len(self)} values.")
        return self.spill.read(self.name, i, i + 1).numpy()[0]

    def parts(self, part: int = 1 << 16) -> Iterator[np.ndarray]:
        """The values ``part`` at a time, in order."""
        for s in range(0, len(self), part):
            yield self[s : s + part]

    def sum(self) -> Any:
        """The sum of the values (a count, for bools), read a part at a time."""
        return sum((p.sum() for p in self.parts()), start=self.dtype.type(0).sum())

    def searchsorted(self, value: float) -> int:
        """How many of the (sorted) values lie below ``value``: a binary search on disk."""
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if self[mid] < value else (lo, mid)
        return lo


def _no_room(exc: OSError) -> DevicepipeError:
    """The one-line error for temporary files that cannot be written."""
    return DevicepipeError(
        f"cannot write temporary files in {tempfile.gettempdir()} ({exc.strerror or exc}): a long recording's "
        "beats wait there while it is worked through (about 65 bytes a beat); free space there, or set TMPDIR "
        "to a folder on a disk with room."
    )
