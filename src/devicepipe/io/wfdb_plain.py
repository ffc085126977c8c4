"""Plain WFDB records read in a twentieth of the time: wfdb's own header grammar, without its
per-field table lookups.

``wfdb.rdheader`` parses a header with the regular expressions of ``wfdb.io.header`` and then
looks every field's default and type up in a pandas table, about 30 lookups a record: 0.5 ms of
the 0.75 ms ``wfdb.rdrecord`` takes for a 10-s record (CPSC 2019's, PTB-XL's), where reading its
samples takes 0.02 ms. A folder of 10,000 such records spends five seconds in those lookups.

Here a *plain* record (one segment; every signal in one file, in one of :data:`PLAIN_FORMATS`,
one sample per frame, no skew, no byte offset; a stated rate, length and name per signal) is
parsed with the same expressions (``wfdb.io.header.rx_record``, ``rx_signal``,
``parse_header_content``), given the same defaults (:data:`SIGNAL_DEFAULTS`, checked against
wfdb's table by the tests) and converted to physical units by the same NumPy calls as
``wfdb.Record.dac``; the tests check the values equal ``wfdb.rdrecord``'s bit for bit. Anything
else, and any header or file that does not fit what it says, answers None: the caller reads it
with ``wfdb.rdrecord``, which reads every record and explains what is wrong with a bad one.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from devicepipe.io.raw import RawSeries

__all__ = [
    "PLAIN_FORMATS",
    "SIGNAL_DEFAULTS",
    "PlainHeader",
    "missing_samples",
    "physical",
    "plain_header",
    "read_plain",
    "signal_bytes",
    "stored_frames",
]

#: The formats read here: NumPy dtype of a stored sample (212 and 24: packed, see
#: :func:`_decode`), the offset subtracted from it, and the value that marks a missing sample
#: (wfdb's ``INVALID_SAMPLE_VALUE``).
PLAIN_FORMATS: dict[str, tuple[str, int, int]] = {
    "16": ("<i2", 0, -(2**15)),
    "61": (">i2", 0, -(2**15)),
    "160": ("<u2", 2**15, -(2**15)),
    "80": ("u1", 2**7, -(2**7)),
    "32": ("<i4", 0, -(2**31)),
    "24": ("u1", 0, -(2**23)),
    "212": ("u1", 0, -(2**11)),
}
#: Bytes per sample of each format (212: three bytes per two samples).
_BYTES = {"16": 2.0, "61": 2.0, "160": 2.0, "80": 1.0, "32": 4.0, "24": 3.0, "212": 1.5}
#: wfdb's read defaults of the signal fields a plain record may leave out (its ``SIGNAL_SPECS``),
#: and its rule that a gain of 0 means 200; a left-out baseline is the ADC zero, or 0.
SIGNAL_DEFAULTS: dict[str, Any] = {"adc_gain": 200.0, "baseline": 0, "units": "mV"}


@dataclass(frozen=True)
class PlainHeader:
    """A plain record's header: the signal file, its format, rate (Hz), length (samples per
    signal) and, per signal, name, units, gain (ADC units per physical unit) and baseline."""

    file: str
    fmt: str
    fs: float
    length: int
    names: list[str]
    units: list[str]
    gains: list[float]
    baselines: list[int]


def plain_header(base: str | os.PathLike[str]) -> PlainHeader | None:
    """The header of the record ``base`` (its path without a suffix) where it is plain (see the
    module docstring), else None; None too where the header cannot be read."""
    from wfdb.io import header as grammar  # wfdb's own expressions (imported where used: see devicepipe.io.wfdb)

    base = os.fspath(base)
    try:
        with open(base + ".hea", "rb", buffering=0) as fh:  # (unbuffered: a header is one read)
            text = fh.read().decode("ascii", errors="ignore")
        lines, _ = grammar.parse_header_content(text)  # (splitlines: any line ending)
    except (OSError, ValueError):
        return None
    record = grammar.rx_record.match(lines[0]) if lines else None
    if record is None or record["n_seg"] or not record["fs"] or not record["sig_len"]:
        return None
    n_sig, fs, length = int(record["n_sig"]), float(record["fs"]), int(record["sig_len"])
    if not n_sig or len(lines) != n_sig + 1 or not fs > 0 or not math.isfinite(fs):
        return None
    # one pass over the signal lines (a header is read per record: a folder of short records reads
    # thousands): all in one file, in one plain format, one sample per frame, no skew or offset, named
    file, fmt = None, None
    names, units, gains, baselines = [], [], [], []
    for line in lines[1:]:
        sig = grammar.rx_signal.match(line)
        if sig is None or not sig["sig_name"] or sig["samps_per_frame"] not in ("", "1"):
            return None
        if sig["skew"] not in ("", "0") or sig["byte_offset"] not in ("", "0"):
            return None
        file, fmt = (sig["file_name"], sig["fmt"]) if file is None else (file, fmt)
        if sig["file_name"] != file or sig["fmt"] != fmt:
            return None
        try:
            gain = float(sig["adc_gain"]) if sig["adc_gain"] else SIGNAL_DEFAULTS["adc_gain"]
            baselines.append(int(sig["baseline"] or sig["adc_zero"] or SIGNAL_DEFAULTS["baseline"]))
        except ValueError:
            return None
        gains.append(gain if gain != 0 else SIGNAL_DEFAULTS["adc_gain"])  # wfdb: a gain of 0 means 200
        names.append(sig["sig_name"])
        units.append(sig["units"] or str(SIGNAL_DEFAULTS["units"]))
    if fmt not in PLAIN_FORMATS or file in ("", "~", "-") or file is None:
        return None
    return PlainHeader(os.path.join(os.path.dirname(base), file), fmt, fs, length, names, units, gains, baselines)


def signal_bytes(head: PlainHeader) -> int:
    """The bytes the signal file of the plain record ``head`` holds where it is whole: every
    signal's samples, as its header states them."""
    return math.ceil(head.length * len(head.names) * _BYTES[head.fmt])


def read_plain(
    head: PlainHeader, channels: list[int] | None, start: int = 0, stop: int | None = None, source: str = ""
) -> RawSeries | None:
    """Signals ``channels`` (positions; None: all) of the plain record whose header is ``head``,
    samples ``[start, stop)``, in physical units as ``wfdb.rdrecord(..., return_res=32)`` gives
    them: values ``(channels, time)`` float32, with names, units and rate (``source``: the
    record's name, for messages). None where the span is not inside the record or its signal
    file is shorter than its header says."""
    chosen = list(range(len(head.names))) if channels is None else channels
    digital = stored_frames(head, chosen, start, stop)
    if digital is None:
        return None
    values = torch.from_numpy(physical(head, digital, chosen, missing_samples(head, digital)))  # (this call's own)
    return RawSeries(values, [head.names[c] for c in chosen], [head.units[c] for c in chosen], head.fs, None, source)


def stored_frames(head: PlainHeader, chosen: list[int], start: int = 0, stop: int | None = None) -> np.ndarray | None:
    """The stored values of signals ``chosen`` (positions), frames ``[start, stop)`` (default: the
    whole record), ``(time, len(chosen))`` integers (:func:`_decode`); None where the span or a
    channel is not in the record, or its signal file is shorter than its header says."""
    n_sig = len(head.names)
    stop = head.length if stop is None else stop
    if not 0 <= start < stop <= head.length or not chosen or any(not 0 <= c < n_sig for c in chosen):
        return None
    digital = _frames(head, n_sig, start, stop)
    if digital is None or chosen == list(range(n_sig)):
        return digital
    return digital[:, chosen]


def missing_samples(head: PlainHeader, digital: np.ndarray) -> np.ndarray | None:
    """Where the stored values ``digital`` mark a missing sample (a bool array of their shape), or
    None where none does: the mark is its format's least value, so a minimum above it says there
    is none (one pass, no mask)."""
    invalid = PLAIN_FORMATS[head.fmt][2]
    return digital == invalid if digital.size and digital.min() <= invalid else None


def physical(head: PlainHeader, digital: np.ndarray, chosen: list[int], missing: np.ndarray | None) -> np.ndarray:
    """Stored values ``digital`` ``(time, len(chosen))`` of signals ``chosen`` in physical units,
    float32 ``(channels, time)``, NaN where ``missing`` (:func:`missing_samples`): ``wfdb.Record.dac``'s
    own steps, for the same float32 values, less one that changes nothing (subtracting a baseline
    of 0 leaves every value as it is)."""
    values = digital.astype("float32")
    baselines = [head.baselines[c] for c in chosen]
    if any(baselines):
        np.subtract(values, baselines, values)
    np.divide(values, [head.gains[c] for c in chosen], values)
    if missing is not None:
        values[missing] = np.nan
    return np.ascontiguousarray(values.T)


def _frames(head: PlainHeader, n_sig: int, start: int, stop: int) -> np.ndarray | None:
    """The stored values of frames ``[start, stop)``: ``(stop - start, n_sig)`` integers (of the
    narrowest type that holds them: :func:`_decode`), or None where the file is shorter than the
    header says."""
    first, count = start * n_sig, (stop - start) * n_sig
    lead = first % 2 if head.fmt == "212" else 0  # 212 packs two samples in three bytes: start on a pair
    first, count = first - lead, count + lead
    per = _BYTES[head.fmt]
    offset, size = int(first * per), math.ceil(count * per)
    try:
        # one unbuffered read of the span (np.fromfile duplicates the file descriptor and seeks on
        # both, twice the time for a 10-s record); the size from the open file, not another stat
        with open(head.file, "rb", buffering=0) as fh:
            if os.fstat(fh.fileno()).st_size < signal_bytes(head):
                return None
            fh.seek(offset)
            data = fh.read(size)
    except OSError:
        return None
    if len(data) != size:
        return None
    raw = np.frombuffer(data, dtype=PLAIN_FORMATS[head.fmt][0] if per in (1.0, 2.0, 4.0) else "u1")
    return _decode(raw, head.fmt, count)[lead:].reshape(-1, n_sig)


def _decode(raw: np.ndarray, fmt: str, count: int) -> np.ndarray:
    """``count`` stored samples from the bytes (or words) ``raw`` of format ``fmt``, ``(count,)``:
    formats 16, 61 and 32 as stored (their words are the values), 80 and 160 less their offset as
    int32, 212 and 24 unpacked as int64. Every one of these integer types converts to float32 exactly
    as int64 does (the values are the same integers), so the physical values are wfdb's; the narrow
    ones spare a short record's read a wide copy."""
    if fmt == "212":
        b = raw.astype(np.int64)
        flat = np.zeros((count + 1) // 2 * 3, dtype=np.int64)
        flat[: b.size] = b
        pairs = flat.reshape(-1, 3)  # three bytes hold two samples
        values = np.empty(pairs.shape[0] * 2, dtype=np.int64)
        values[0::2] = pairs[:, 0] | ((pairs[:, 1] & 0x0F) << 8)
        values[1::2] = pairs[:, 2] | ((pairs[:, 1] & 0xF0) << 4)
        values = values[:count]
        return np.where(values >= 2**11, values - 2**12, values)
    if fmt == "24":
        b = raw.astype(np.int64).reshape(-1, 3)
        values = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        return np.where(values >= 2**23, values - 2**24, values)
    offset = PLAIN_FORMATS[fmt][1]
    return raw if not offset else raw.astype(np.int32) - offset
