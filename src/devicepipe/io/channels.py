"""Which channel of a recording holds the ECG, and which column its times, when none is named.

Files put other things first: a table its time or sample-number column, a sleep study's EDF
its EEG, a monitor's WFDB record its respiration. :func:`choose_signal` looks at what the file
says without reading its samples (a table's first :data:`AXIS_ROWS` rows, a header's signal
names) and gives the channel to read, the channels passed over, and a table's column of
timestamps, whose steps are the rate where no rate is stated. :func:`time_column_of` finds a
load series' column of times the same way.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from devicepipe.io.edf import EDF_SUFFIXES, edf_header
from devicepipe.io.tables import CSV_DELIMITERS, PARQUET_SUFFIXES, table_head
from devicepipe.io.wfdb import is_wfdb_record, wfdb_signal_names

__all__ = [
    "AXIS_ROWS",
    "TIME_UNITS",
    "SignalChoice",
    "axis_rates",
    "choose_signal",
    "is_ecg_name",
    "signal_column",
    "time_column_of",
]

#: Rows a table's columns are judged by when :func:`choose_signal` looks for the signal.
AXIS_ROWS = 1000

#: Signal names that are an ECG lead: an EDF+ type ``ECG``/``EKG`` anywhere in the label, or a
#: lead's own name (the limb and chest leads, MIT-BIH's modified leads, a monitor's ``V``).
_ECG_NAME = re.compile(r"ECG|EKG|^(I{1,3}|AVR|AVL|AVF|V[1-6]?|MLI{1,3})$", re.IGNORECASE)

#: Column names that say a column of text holds times (``Datetime``, ``timestamp``, ``date_utc``).
_TIME_NAME = re.compile(r"time|date|^ts$|^when$", re.IGNORECASE)


class SignalChoice(NamedTuple):
    """What :func:`choose_signal` found: the channel to read (a name, or 0 for the first), the
    channels passed over before it, a table's first column of timestamps (before the channel or
    after it; None where there is none), and every channel named as an ECG lead (``channel``
    first; empty where none is)."""

    channel: int | str
    passed: list[str]
    time_column: str | None
    leads: tuple[str, ...] = ()


def is_ecg_name(name: str) -> bool:
    """Whether a signal's name says it is an ECG lead (``"ECG II"``, ``"EKG"``, ``"MLII"``, ``"V5"``)."""
    return bool(_ECG_NAME.search(name.strip()))


def choose_signal(source: Any) -> SignalChoice:
    """The channel an ECG command reads when none is named.

    - A CSV or Parquet table: its first column that is not an axis. An axis is a column of
      timestamps, or of numbers whose first :data:`AXIS_ROWS` values only rise (never falling,
      and rising in most steps): the time in seconds, a sample number, an epoch time. A signal
      (an ECG, a load) falls as often as it rises. A column of text is not an axis (reading it
      says what is wrong with it).
    - An EDF/BDF file or a WFDB record, whose signals are named: the first whose name says it is
      an ECG lead (:func:`is_ecg_name`).
    - Anything else, or a source with no such column or signal: the first channel.

    ``leads`` lists every channel (signal, or table column that is not an axis) whose name says
    it is an ECG lead, the chosen one first: where there are two or more, an ECG command finds
    its beats on all of them together.
    """
    first = SignalChoice(0, [], None)
    if not isinstance(source, (str, os.PathLike)):
        return first
    path = Path(source)
    suffix = path.suffix.lower()
    try:
        if is_wfdb_record(path):
            return _first_named_ecg(wfdb_signal_names(path))
        if suffix in EDF_SUFFIXES and path.is_file():
            return _first_named_ecg(edf_header(path)["labels"])
        if suffix not in (*CSV_DELIMITERS, *PARQUET_SUFFIXES) or not path.is_file():
            return first
        head = table_head(path, AXIS_ROWS)
    except Exception:  # noqa: BLE001 - the read proper says what is wrong
        return first
    names = head.column_names
    if len(set(names)) < len(names):  # (a column is known by its name: reading says which is named twice)
        return first
    signals = [name for name in names if not _is_axis(head.column(name))]
    at = names.index(signals[0]) if signals else 0
    leads = _ecg_leads(signals, names[at] if names else None)
    # the timestamps wherever they are, before the signal or after it
    times = next((n for n in names if pa.types.is_timestamp(head.column(n).type)), None)
    if not at:
        return first._replace(leads=leads, time_column=times)
    return SignalChoice(names[at], names[:at], times, leads)


def time_column_of(source: Any) -> str | None:
    """The column of timestamps of a CSV or Parquet table, when none is named: the first column
    the reader takes for times or dates (of its first :data:`AXIS_ROWS` rows), else the first
    column of text named as times (``Datetime``, ``timestamp``, ``date``: times in a layout the
    reader does not guess, which ``time_format`` then gives). None for anything else, or a
    table with no such column (the read proper says what is wrong with an unreadable file)."""
    head = _head_of_table(source)
    if head is None:
        return None
    columns = [(f.name, f.type) for f in head.schema]  # by position: a repeated name is the read's to refuse
    typed = (name for name, kind in columns if pa.types.is_timestamp(kind) or pa.types.is_date(kind))
    named = (name for name, kind in columns if _is_text(kind) and _TIME_NAME.search(name))
    return next(typed, None) or next(named, None)


def _head_of_table(source: Any) -> pa.Table | None:
    """The first :data:`AXIS_ROWS` rows of a CSV or Parquet file; None for anything else, or a
    file that cannot be read (the read proper says what is wrong with it)."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = Path(source)
    if path.suffix.lower() not in (*CSV_DELIMITERS, *PARQUET_SUFFIXES) or not path.is_file():
        return None
    try:
        return table_head(path, AXIS_ROWS)
    except Exception:  # noqa: BLE001 - the read proper says what is wrong
        return None


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def signal_column(source: Any) -> tuple[int | str, list[str]]:
    """:func:`choose_signal`'s channel and the channels it passed over."""
    choice = choose_signal(source)
    return choice.channel, choice.passed


def _first_named_ecg(names: list[str]) -> SignalChoice:
    at = next((i for i, name in enumerate(names) if is_ecg_name(name)), 0)
    leads = _ecg_leads(names, names[at] if names else None)
    return SignalChoice(names[at], names[:at], None, leads) if at else SignalChoice(0, [], None, leads)


def _ecg_leads(names: list[str], chosen: str | None) -> tuple[str, ...]:
    """The ``names`` that say they are an ECG lead, when the ``chosen`` channel is the first of
    them and none is repeated (a repeated name cannot pick one channel); else none."""
    leads = tuple(name for name in names if is_ecg_name(name))
    return leads if leads and leads[0] == chosen and len(set(leads)) == len(leads) else ()


#: The units a table's column of times in numbers may be in, with how many make a second.
TIME_UNITS = (("seconds", 1.0), ("milliseconds", 1e3), ("microseconds", 1e6))


def axis_rates(
    source: Any, lowest: float = 1.0, highest: float = 100_000.0
) -> tuple[str, float, list[tuple[str, float]]]:
    """What a table's first axis column of numbers (:func:`choose_signal`'s) says of the rate, where
    no rate is stated: its name, its median step, and the rates (Hz) that step makes in each of
    :data:`TIME_UNITS` within ``[lowest, highest]`` (e.g. ``("time", 0.004, [("seconds", 250.0)])``).
    Nothing (``("", 0.0, [])``) for anything else, sample numbers (a step of 1 in integers), or a
    file that cannot be read (the read proper says why)."""
    nothing: tuple[str, float, list[tuple[str, float]]] = ("", 0.0, [])
    head = _head_of_table(source)
    if head is None:
        return nothing
    for name in head.column_names:
        col = head.column(name)
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)) or not _is_axis(col):
            continue
        steps = np.diff(col.drop_null().to_numpy().astype(np.float64))
        step = float(np.median(steps[steps > 0])) if (steps > 0).any() else 0.0
        if step <= 0 or (pa.types.is_integer(col.type) and step == 1.0):
            return nothing  # (sample numbers say nothing of the rate)
        rates = [(unit, per / step) for unit, per in TIME_UNITS if lowest <= per / step <= highest]
        return name, step, rates
    return nothing


def _is_axis(col: pa.ChunkedArray) -> bool:
    """Whether a table column's first values are an axis (see :func:`choose_signal`)."""
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
        return True
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        return False
    steps = np.diff(col.drop_null().to_numpy().astype(np.float64))
    return steps.size >= 9 and bool((steps >= 0).all()) and 2 * int((steps > 0).sum()) > steps.size
