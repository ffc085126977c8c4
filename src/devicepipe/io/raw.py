"""What every reader returns before the samples reach the device, and how columns are chosen.

A reader (tables, WFDB, arrays) turns its source into a :class:`RawSeries`: values of shape
``(channels, time)`` still on the host (or wherever an in-memory tensor already was), their
names, units and rate, and the time column if there is one. :func:`pick_columns` and
:func:`resolve_names` turn the user's column choice (names or positions) into positions,
with the same error wording for every format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from devicepipe.core.errors import ReadError

__all__ = ["ColumnSpec", "RawSeries", "channel_names", "column_list", "pick_columns", "resolve_names"]

ColumnSpec = str | int | Sequence[str | int] | None


@dataclass
class RawSeries:
    """A reader's result: ``values`` of shape ``(channels, time)`` (host, or an in-memory tensor's device)."""

    values: torch.Tensor
    names: list[str]
    units: list[str | None]
    sampling_rate: float | None  # Hz, when the source says
    times: np.ndarray | None  # datetime64[ns] of shape (time,), when the source has a time column
    source: str  # a description of where the values came from, for messages
    wall_times: np.ndarray | None = None  # where the times carry a zone: the wall-clock times (see io.clock)

    @property
    def n_time(self) -> int:
        return int(self.values.shape[-1])

    def times_on(self, wall_clock: bool) -> np.ndarray | None:
        """The times as instants, or with ``wall_clock`` on the clock they were written in where they
        carry a zone (see :mod:`devicepipe.io.clock`); None without a time column."""
        return self.wall_times if wall_clock and self.wall_times is not None else self.times


def channel_names(n: int) -> list[str]:
    """The names of the ``n`` channels of an array, which has none of its own: ``ch0``, ``ch1``, ..."""
    return [f"ch{i}" for i in range(n)]


def resolve_names(wanted: Sequence[str | int], names: list[str], what: str, source: str) -> list[int]:
    """Positions of ``wanted`` (names or positions, negative from the end) among ``names``."""
    indices = []
    for item in wanted:
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not -len(names) <= item < len(names):
                raise ReadError(
                    f"read_series(): {what} {item} is out of range in {source}; there are {len(names)}: {names}."
                )
            indices.append(int(item) % len(names))
        elif item in names:
            indices.append(names.index(item))
        else:
            raise ReadError(f"read_series(): {what} {item!r} not found in {source}; {what}s are {names}.")
    return indices


def column_list(column: ColumnSpec) -> list[str | int] | None:
    """A column choice as a list (None stays None: every column)."""
    if column is None:
        return None
    if isinstance(column, (str, int, np.integer)):
        return [column]
    return list(column)


def pick_columns(
    names: list[str], column: ColumnSpec, time_column: str | int | None, source: str
) -> tuple[list[str], str | None]:
    """The value columns chosen by ``column`` (default: all but the time column) and the time column's name."""
    time_name = None
    if time_column is not None:
        time_name = names[resolve_names([time_column], names, "column", source)[0]]
    wanted = column_list(column)
    if wanted is None:
        chosen = [n for n in names if n != time_name]
        if not chosen:
            raise ReadError(f"read_series(): {source} has no value column besides the time column.")
    else:
        chosen = [names[i] for i in resolve_names(wanted, names, "column", source)]
        if time_name in chosen:
            raise ReadError(f"read_series(): column {time_name!r} is the time column; choose a value column.")
    return chosen, time_name
