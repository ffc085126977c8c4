"""EDF, EDF+ and BDF recordings (what Holters and sleep labs export), through pyedflib.

pyedflib (the EDFlib C library) was chosen over edfio by measured speed on a 24-hour two-lead
file (``benchmarks/edf_readers.py``): one whole channel in 0.28 s against 0.44 s, the same
values to the last bit; both read a slice without touching the rest of the file.
Samples come as physical values (the header's unit) in float64, cut to ``[start, stop)``
when asked. The EDF+ annotation channel is not a signal; its annotations are read by
:func:`read_edf_annotations` (beat labels become reference beats, see
:func:`devicepipe.io.read_reference`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from devicepipe.errors import ReadError
from devicepipe.interop import to_torch
from devicepipe.io.raw import ColumnSpec, RawSeries, column_list, resolve_names

__all__ = ["EDF_SUFFIXES", "edf_header", "read_edf", "read_edf_annotations"]

EDF_SUFFIXES = frozenset({".edf", ".bdf"})


@contextlib.contextmanager
def _open(path: Path, where: str) -> Iterator[Any]:
    try:
        import pyedflib
    except ImportError:  # pragma: no cover - a declared dependency
        raise ReadError(f"{where}: reading EDF needs pyedflib; pip install pyedflib.") from None
    if not path.is_file():
        raise ReadError(f"{where}: file not found: {path}.")
    try:
        reader = pyedflib.EdfReader(str(path))
    except (OSError, ValueError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ReadError(
            f"{where}: {path.name} is not a readable EDF/BDF file ({detail}); check that it is whole (not truncated)."
        ) from None
    try:
        yield reader
    finally:
        reader.close()


def edf_header(path: str | Path) -> dict[str, Any]:
    """The signals of an EDF file without reading them: ``labels``, ``rates`` (Hz), ``lengths``
    (samples), ``units``."""
    path = Path(path)
    with _open(path, "read_series()") as f:
        n = f.signals_in_file
        return {
            "labels": [f.getLabel(i).strip() for i in range(n)],
            "rates": [float(f.getSampleFrequency(i)) for i in range(n)],
            "lengths": [int(v) for v in f.getNSamples()],
            "units": [f.getPhysicalDimension(i).strip() or None for i in range(n)],
        }


def read_edf(path: Path, column: ColumnSpec, start: int = 0, stop: int | None = None) -> RawSeries:
    """The chosen signals (default: all) of an EDF/EDF+/BDF file as ``(channels, time)``
    physical values, samples ``[start, stop)``; the chosen signals must share one rate."""
    with _open(path, "read_series()") as f:
        n = f.signals_in_file
        if n == 0:
            raise ReadError(f"read_series(): {path.name} holds no signal (only annotations).")
        names = [f.getLabel(i).strip() or f"ch{i}" for i in range(n)]
        wanted = column_list(column)
        idx = list(range(n)) if wanted is None else resolve_names(wanted, names, "signal", path.name)
        rates = {float(f.getSampleFrequency(i)) for i in idx}
        if len(rates) > 1:
            chosen = ", ".join(f"{names[i]} at {f.getSampleFrequency(i):g} Hz" for i in idx)
            raise ReadError(
                f"read_series(): the signals of {path.name} have different rates ({chosen}); "
                "choose the ones that share a rate with column=.",
                cli=f"the signals of {path.name} have different rates ({chosen}); choose one with --channel.",
            )
        length = min(int(f.getNSamples()[i]) for i in idx)
        end = length if stop is None else min(stop, length)
        count = max(0, end - start)
        try:
            values = (
                np.stack([f.readSignal(i, start=start, n=count) for i in idx]) if count else np.zeros((len(idx), 0))
            )
        except (OSError, ValueError) as exc:
            raise ReadError(f"read_series(): cannot read the samples of {path.name} ({exc}).") from None
        units = [f.getPhysicalDimension(i).strip() or None for i in idx]
    return RawSeries(to_torch(values), [names[i] for i in idx], units, rates.pop(), None, path.name)


def read_edf_annotations(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """EDF+ annotations: onsets in seconds (float64, ``(n,)``) and their texts (``(n,)``), by onset."""
    path = Path(path)
    with _open(path, "read_reference()") as f:
        onsets, _durations, texts = f.readAnnotations()
    order = np.argsort(onsets, kind="stable")
    return np.asarray(onsets, dtype=np.float64)[order], np.asarray(texts, dtype=str)[order]
