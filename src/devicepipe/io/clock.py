"""Time columns: the instants they name, and, where they carry a zone or a UTC offset, the
wall-clock times they were written in.

``2020-03-29T03:00:00+02:00`` is the instant ``2020-03-29T01:00:00`` UTC, and 3 o'clock on the
clock where it was written. Instants are what a sampling rate is read from (an ECG over a change
of daylight-saving time goes on without a gap); wall-clock times are what a day or an hour of a
load series is (a day of a household's load starts at its midnight, not at UTC's): see
``read_series(..., wall_clock=True)``. Times without a zone are both at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from devicepipe.core.errors import ReadError

__all__ = ["OFFSET", "arrow_times", "index_times", "times_from_arrow"]

#: A UTC offset (``+02:00``, ``-0530``, ``+01``) or ``Z`` ending an ISO 8601 time.
OFFSET = r"(?:Z|[+-]\d\d(?::?\d\d)?)$"


def arrow_times(
    col: pa.ChunkedArray, name: str, source: str, *, caller: str = "read_series()", what: str = "time column"
) -> tuple[np.ndarray, np.ndarray | None]:
    """An Arrow time column (timestamps, dates or ISO 8601 strings) as ``datetime64[ns]`` instants
    (in UTC where the column carries a zone or offsets), and the wall-clock times where it does
    (``datetime64[ns]``; None where it does not); an error (from ``caller``, of its ``what``) for
    an empty value, text that is not a time, or another type. Both ``(n,)``."""
    if col.null_count:
        raise ReadError(f"{caller}: {what} {name!r} of {source} has {col.null_count} empty value(s).")
    wall = None
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        try:
            if pc.any(pc.match_substring_regex(col, OFFSET)).as_py():
                wall = _ns(pc.replace_substring_regex(col, OFFSET, "").cast(pa.timestamp("ns")))
                col = col.cast(pa.timestamp("ns", tz="UTC"))
            else:
                col = col.cast(pa.timestamp("ns"))
        except pa.ArrowInvalid:
            raise ReadError(f"{caller}: cannot parse {what} {name!r} of {source} as ISO 8601 times.") from None
    elif pa.types.is_timestamp(col.type) and col.type.tz is not None:
        wall = _ns(pc.local_timestamp(col))
    if not pa.types.is_timestamp(col.type) and not pa.types.is_date(col.type):
        raise ReadError(f"{caller}: {what} {name!r} of {source} holds {col.type}, not times.")
    return _ns(col), wall


def times_from_arrow(
    col: pa.ChunkedArray,
    name: str,
    source: str,
    *,
    caller: str = "read_series()",
    what: str = "time column",
    wall_clock: bool = False,
) -> np.ndarray:
    """:func:`arrow_times`' instants, or with ``wall_clock`` its wall-clock times where the column
    has them (``datetime64[ns]``, ``(n,)``)."""
    instants, wall = arrow_times(col, name, source, caller=caller, what=what)
    return wall if wall_clock and wall is not None else instants


def index_times(obj: Any, source: str) -> tuple[np.ndarray, np.ndarray | None] | None:
    """A pandas object's DatetimeIndex as :func:`arrow_times` gives a column of them (instants,
    wall-clock times where it has a zone), or None for any other index."""
    index = obj.index
    if not str(getattr(index, "dtype", "")).startswith("datetime64"):
        return None
    return arrow_times(pa.chunked_array([pa.array(index)]), str(index.name or "index"), source)


def _ns(col: Any) -> np.ndarray:
    return col.to_numpy().astype("datetime64[ns]")
