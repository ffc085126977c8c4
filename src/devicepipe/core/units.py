"""Parsing of durations written by people: ``"24h"``, ``"30min"``, ``"1h30m"``, ``"90s"``, ``"2d"``;
sizes (``"2GB"``); and the one check of a sampling rate every function given one makes."""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

from devicepipe.core.errors import DevicepipeError

__all__ = ["check_peaks", "format_duration", "hertz", "parse_bytes", "parse_duration", "positive", "whole"]

_UNITS_S = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "min": 60.0, "m": 60.0, "s": 1.0, "ms": 1e-3}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|min|w|d|h|m|s)")


def parse_duration(text: str | float) -> float:
    """Seconds in a duration such as ``"24h"``, ``"30min"``, ``"1h30m"``, ``"1.5d"``, ``"1w"`` or ``"90s"``.

    Written durations need their unit (``"90"`` is refused: seconds, minutes or days?); a
    number (``int``/``float``) is taken as seconds. Raises DevicepipeError for anything else,
    or a duration that is not positive.
    """
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        s = text.strip().lower().replace(" ", "")
        if re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)", s):
            raise DevicepipeError(f"duration {text!r} has no unit; write e.g. '{s}s', '{s}min', '{s}h' or '{s}d'.")
        parts = _PART.findall(s)
        if not parts or "".join(n + u for n, u in parts) != s:
            raise DevicepipeError(
                f"cannot read duration {text!r}; write e.g. '24h', '30min', '1h30m', '90s', '2d' or '1w'."
            )
        seconds = sum(float(n) * _UNITS_S[u] for n, u in parts)
    if not seconds > 0:
        raise DevicepipeError(f"duration {text!r} must be positive.")
    return seconds


#: A year (the Julian year of 365.25 days), s.
YEAR_S = 365.25 * 86400


def format_duration(seconds: float) -> str:
    """``seconds`` for a person: ``13.8 years``, ``2.50 d``, ``1.25 h``, ``30.0 min`` or ``4.20 s``
    (years from a year on: a load series of 14 years read "5052.88 d")."""
    if seconds >= YEAR_S:
        return f"{seconds / YEAR_S:.1f} years"
    if seconds >= 86400:
        return f"{seconds / 86400:.2f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.2f} s"


_BYTES = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(text: str | int) -> int:
    """Bytes in a size such as ``"2GB"``, ``"512MiB"`` or ``"1.5 GiB"`` (an int is taken as bytes)."""
    if isinstance(text, int):
        value = text
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?i?b)\s*", text.lower())
        if not match:
            raise DevicepipeError(f"cannot read size {text!r}; write e.g. '2GB', '512MiB' or '1.5GiB'.")
        value = int(float(match.group(1)) * _BYTES[match.group(2)])
    if value <= 0:
        raise DevicepipeError(f"size {text!r} must be positive.")
    return value


def hertz(rate: Any, where: str) -> float:
    """``rate`` as a float of Hz, or a :class:`DevicepipeError` naming ``where`` (the function
    asked, e.g. ``"ecg_classes()"``) unless it is a finite, positive number (a Python or NumPy
    number, or a one-element tensor; not text, not a bool)."""
    value = rate
    if callable(getattr(rate, "item", None)) and not isinstance(rate, (str, bytes)):
        try:
            value = rate.item()  # a NumPy number or a one-element array or tensor
        except (ValueError, RuntimeError):
            value = rate  # (more than one element)
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(hz := float(value)) and hz > 0:
        return hz
    got = f"{rate!r} (text)" if isinstance(rate, (str, bytes)) else repr(rate)
    raise DevicepipeError(f"{where}: sampling_rate must be a finite, positive number of Hz, got {got}.")


def check_peaks(peaks: Any, where: str, n_samples: int | None = None, *, arrays: bool = False) -> None:
    """A :class:`DevicepipeError` naming ``where`` unless ``peaks`` are R peaks as the stages take
    them: a ``torch.Tensor`` (or, with ``arrays``, a NumPy array) of shape ``(n_peaks,)`` of sample
    positions, rising strictly (a beat is read from the intervals either side of it: a repeated or
    out-of-order peak would read its neighbours wrongly), and, with ``n_samples``, inside the
    signal ``[0, n_samples)``."""
    kind = type(peaks).__module__.split(".")[0]
    if kind not in ("torch", *(("numpy",) if arrays else ())) or not hasattr(peaks, "ndim"):
        raise DevicepipeError(
            f"{where}: peaks must be a torch.Tensor of sample positions, shape (n_peaks,), got "
            f"{type(peaks).__name__}; e.g. the R peaks ecg_peaks() returns, or torch.as_tensor(peaks)."
        )
    if peaks.ndim != 1:
        raise DevicepipeError(f"{where}: peaks must have shape (n_peaks,), got {tuple(peaks.shape)}.")
    if len(peaks) < 1:
        return
    # (on the peaks' own device, the tensor's or NumPy's: no copy of them to check them)
    if len(peaks) > 1 and bool((peaks[1:] <= peaks[:-1]).any()):
        raise DevicepipeError(f"{where}: peaks must be strictly increasing sample indices; sort them and drop repeats.")
    first, last = float(peaks[0]), float(peaks[-1])
    if n_samples is not None and (first < 0 or last >= n_samples):
        raise DevicepipeError(
            f"{where}: peaks must lie inside the signal's {n_samples:,} samples, got {first:g} to {last:g}; "
            "are they this signal's, at its sampling rate?"
        )


def whole(value: Any, where: str, name: str, unit: str) -> int:
    """``value`` as an int, or a :class:`DevicepipeError` from ``where`` unless it is a whole number
    (a Python or NumPy integer, not a bool) of at least 1 ``unit`` (samples, neighbours, ...)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise DevicepipeError(f"{where}: {name} must be a whole number of {unit}, at least 1, got {value!r}.")
    return int(value)


def positive(value: Any, where: str, name: str, unit: str = "") -> float:
    """``value`` as a float, or a :class:`DevicepipeError` from ``where`` unless it is a finite,
    positive real number (``unit``: how the message names it, e.g. ``"Hz"``)."""
    number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    if not (math.isfinite(number) and number > 0):
        of = f" of {unit}" if unit else ""
        raise DevicepipeError(f"{where}: {name} must be a finite, positive number{of}, got {value!r}.")
    return number
