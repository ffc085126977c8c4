"""EDF, EDF+ and BDF recordings (what Holters and sleep labs export), through edfio.

edfio was chosen over pyedflib by measured speed on a 24-hour two-lead file
(``benchmarks/edf_readers.py``, medians of 7 interleaved runs on an idle 2-core machine): one
whole channel in 0.08 s against 0.30 s, a 10-minute slice in 0.8 ms against 1.9 ms, the same
values to the last bit. It reads the header, then only the data records a slice needs (for
EDF; a BDF file it reads whole, so a long BDF recording is best converted to EDF before
reading it in chunks).
Samples come as physical values (the header's unit) in float64, cut to ``[start, stop)``
when asked. A file whose data records stop short of what its header says (truncated) is
refused, not read in part. The EDF+ annotation signal is not a signal; its annotations are
read by :func:`read_edf_annotations` (beat labels become reference beats, see
:func:`devicepipe.io.read_reference`).
"""

from __future__ import annotations

import contextlib
import math
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from devicepipe.core.errors import ReadError
from devicepipe.core.interop import convert
from devicepipe.io.raw import ColumnSpec, RawSeries, column_list, resolve_names

__all__ = ["EDF_SUFFIXES", "edf_header", "read_edf", "read_edf_annotations"]

EDF_SUFFIXES = frozenset({".edf", ".bdf"})

#: Bytes of the fixed part of an EDF/BDF header (version, patient, recording, dates, counts).
EDF_HEADER_BYTES = 256


def _open(path: Path, where: str) -> Any:
    """The file's header (its samples are read later, only where asked); a clear error for a
    file that is missing, damaged or truncated."""
    import edfio

    if not path.is_file():
        raise ReadError(f"{where}: file not found: {path}.")
    size = path.stat().st_size
    if size < EDF_HEADER_BYTES:
        raise ReadError(
            f"{where}: {path.name} is not a readable EDF/BDF file: it holds {size} bytes, under the "
            f"{EDF_HEADER_BYTES} of the fixed header every EDF/BDF file starts with (truncated, or not an EDF)."
        )
    _refuse_a_cut_header(path, size, where)
    edf: Any  # edfio's Edf, or its Bdf
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if path.suffix.lower() == ".bdf":
                edf = edfio.read_bdf(path)  # (edfio reads BDF whole: it has no lazy loading for it)
            else:
                edf = edfio.read_edf(path, lazy_load_data=True)
    except Exception as exc:  # noqa: BLE001 - any parsing failure of a damaged file, as one line
        duration = math.nan  # (edfio fails on a zero duration without saying so)
        with contextlib.suppress(OSError, ValueError), path.open("rb") as fh:
            duration = float(fh.read(EDF_HEADER_BYTES)[244:252].decode("ascii", "replace").strip())
        if duration <= 0:
            raise _no_rate(where, path, duration) from None
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ReadError(f"{where}: {path.name} is not a readable EDF/BDF file ({detail}).") from None
    short = [str(w.message) for w in caught if "data record" in str(w.message) and not _unknown_count(str(w.message))]
    if short:
        raise ReadError(
            f"{where}: {path.name} is not a readable EDF/BDF file: it is truncated ({short[-1].rstrip('.')}); "
            "copy it again from its source."
        )
    duration = float(edf.data_record_duration)
    if _signals(edf) and not (math.isfinite(duration) and duration > 0):  # (0 only in annotation-only files)
        raise _no_rate(where, path, duration)
    if str(edf.reserved).strip().upper().startswith("EDF+D") and not _continuous(edf):
        raise ReadError(
            f"{where}: {path.name} is a discontinuous EDF+ file (EDF+D): its data records are not back to back, "
            "and reading them as one signal would join the stretches over their gaps",
            fix="export it as EDF+C, or split it at its gaps into continuous files.",
        )
    return edf


def _unknown_count(message: str) -> bool:
    """Whether edfio's warning on the number of data records is that the header gives it as -1,
    which EDF allows (a recorder that did not write it when it closed the file; edfio counts the
    whole records the file holds), not that the file holds fewer than the header says."""
    return re.search(r"indicates -1 data records", message) is not None


def _refuse_a_cut_header(path: Path, size: int, where: str) -> None:
    """Refuse a file shorter than its own header: the fixed header says how many signals follow,
    each with a header of :data:`EDF_HEADER_BYTES` (edfio's error for it is "list index out of
    range"). A count that is not a number is left to edfio's parse."""
    with path.open("rb") as fh:
        fixed = fh.read(EDF_HEADER_BYTES)
    try:
        signals = int(fixed[252:256].decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        return
    needed = EDF_HEADER_BYTES * (1 + max(signals, 0))
    if size < needed:
        raise ReadError(
            f"{where}: {path.name} is not a readable EDF/BDF file: its header declares {signals} signal(s), whose "
            f"headers take {needed:,} bytes, but the file holds {size:,} (cut short); copy it again from its source."
        )


def _continuous(edf: Any) -> bool:
    """Whether an EDF+D file's data records follow each other without a gap (by its timekeeping
    annotations, as the EDF+ specification defines it); a file whose timekeeping cannot be read is not."""
    try:
        return bool(edf.is_continuous)
    except Exception:  # noqa: BLE001 - a timekeeping signal edfio cannot parse: not known to be continuous
        return False


def _no_rate(where: str, path: Path, duration: float) -> ReadError:
    return ReadError(
        f"{where}: {path.name} is not a readable EDF/BDF file: its header gives a data record duration "
        f"of {duration:g} s, so its signals have no sampling rate (a damaged header)."
    )


def _signals(edf: Any) -> list[Any]:
    return [s for s in edf.signals if s.label != "EDF Annotations"]


def edf_header(path: str | Path) -> dict[str, Any]:
    """The signals of an EDF file without reading them: ``labels``, ``rates`` (Hz), ``lengths``
    (samples), ``units``."""
    edf = _open(Path(path), "read_series()")
    signals = _signals(edf)
    return {
        "labels": [s.label.strip() for s in signals],
        "rates": [float(s.sampling_frequency) for s in signals],
        "lengths": [int(edf.num_data_records * s.samples_per_data_record) for s in signals],
        "units": [s.physical_dimension.strip() or None for s in signals],
    }


class UncalibratedWarning(UserWarning):
    """An EDF signal whose header gives no physical range: read in digital units."""


def read_edf(path: Path, column: ColumnSpec, start: int = 0, stop: int | None = None) -> RawSeries:
    """The chosen signals (default: all) of an EDF/EDF+/BDF file as ``(channels, time)``
    physical values, samples ``[start, stop)``; the chosen signals must share one rate."""
    edf = _open(path, "read_series()")
    signals = _signals(edf)
    if not signals:
        raise ReadError(f"read_series(): {path.name} holds no signal (only annotations).")
    names = [s.label.strip() or f"ch{i}" for i, s in enumerate(signals)]
    wanted = column_list(column)
    idx = list(range(len(signals))) if wanted is None else resolve_names(wanted, names, "signal", path.name)
    chosen = [signals[i] for i in idx]
    rates = {float(s.sampling_frequency) for s in chosen}
    if len(rates) > 1:
        listed = ", ".join(f"{names[i]} at {signals[i].sampling_frequency:g} Hz" for i in idx)
        raise ReadError(
            f"the signals of {path.name} have different rates ({listed})",
            fix="choose the ones that share a rate with {column=}.",
            param="column",
        )
    rate = rates.pop()
    length = min(int(edf.num_data_records * s.samples_per_data_record) for s in chosen)
    end = length if stop is None else min(stop, length)
    count = max(0, end - start)
    try:  # only the data records that hold [start, end) are read
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*returning uncalibrated signal", category=UserWarning)
            parts = [s.get_data_slice(start / rate, end / rate) for s in chosen] if count else []
    except (OSError, ValueError) as exc:
        raise ReadError(f"read_series(): cannot read the samples of {path.name} ({exc}).") from None
    for s in chosen:  # (edfio's own warning names neither the file nor what it means)
        if s.physical_min == s.physical_max or s.digital_min == s.digital_max:
            warnings.warn(
                f"signal {s.label.strip()!r} of {path.name} has no physical range (its minimum equals its "
                "maximum): its values are the file's digital units, not calibrated ones; beats are found, but "
                "amplitudes mean nothing",
                UncalibratedWarning,
                stacklevel=2,
            )
    values = np.stack(parts) if parts else np.zeros((len(chosen), 0))
    units = [s.physical_dimension.strip() or None for s in chosen]
    return RawSeries(convert(values).tensor, [names[i] for i in idx], units, rate, None, path.name)


def read_edf_annotations(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """EDF+ annotations: onsets in seconds (float64, ``(n,)``) and their texts (``(n,)``), by onset."""
    edf = _open(Path(path), "read_reference()")
    annotations = list(edf.annotations)
    onsets = np.asarray([a.onset for a in annotations], dtype=np.float64)
    texts = np.asarray([a.text for a in annotations], dtype=str)
    order = np.argsort(onsets, kind="stable")
    return onsets[order], texts[order]
