"""Reference beats to score a detector against: WFDB or EDF+ annotations, or a table of R-peak
positions; and reference days (a table of dates and kinds) to score a load series' flagged windows against.

A table (CSV, TSV or Parquet, such as the simulator's ``NAME.truth.csv``) names its R peaks
in a column of sample indices (``sample``, ``samples``, ``peak``, ``r_peak``) or of times in
seconds (``time_s``, ``time``, ``seconds``); sample indices win where both are present. A
column of beat labels (``symbol``, ``label``, ``type``: ``N``, ``V``, ...) is read too, as WFDB
annotations carry theirs.
Times become samples once the recording's rate is known (:meth:`ReferenceBeats.samples_at`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from devicepipe.core.errors import ReadError
from devicepipe.io.clock import times_from_arrow
from devicepipe.io.edf import EDF_SUFFIXES, read_edf_annotations
from devicepipe.io.tables import CSV_DELIMITERS, PARQUET_SUFFIXES
from devicepipe.io.wfdb import BEAT_SYMBOLS, read_beat_annotations

__all__ = [
    "DAY_COLUMNS",
    "KIND_COLUMNS",
    "SAMPLE_COLUMNS",
    "SYMBOL_COLUMNS",
    "TIME_COLUMNS",
    "ReferenceBeats",
    "ReferenceDays",
    "read_reference",
    "read_reference_days",
]

#: Column names read as R-peak sample indices, and as R-peak times in seconds (any case).
SAMPLE_COLUMNS = ("sample", "samples", "peak", "r_peak")
TIME_COLUMNS = ("time_s", "time", "seconds")
#: Column names read as beat labels (any case).
SYMBOL_COLUMNS = ("symbol", "label", "type")


@dataclass(frozen=True)
class ReferenceBeats:
    """Reference R peaks as sample indices, or as times in seconds until the rate is known.

    ``samples`` : int64 array of shape ``(n_beats,)``, sorted (None when given as times);
    ``times_s`` : float64 array of shape ``(n_beats,)``, sorted (None when given as samples);
    ``symbols`` : str array of shape ``(n_beats,)``, each beat's label (``"N"``, ``"V"``, ...),
    in the same order (None when the reference has no labels).
    """

    samples: np.ndarray | None
    times_s: np.ndarray | None
    source: str
    symbols: np.ndarray | None = None

    def samples_at(self, sampling_rate: float) -> np.ndarray:
        """The R peaks as int64 sample indices of a recording sampled at ``sampling_rate`` Hz."""
        if self.samples is not None:
            return self.samples
        assert self.times_s is not None  # (one of the two is given)
        return np.rint(self.times_s * sampling_rate).astype(np.int64)


def _table(path: Path) -> pa.Table:
    suffix = path.suffix.lower()
    try:
        if suffix in PARQUET_SUFFIXES:
            return pq.read_table(path)
        parse = pacsv.ParseOptions(delimiter=CSV_DELIMITERS[suffix])
        return pacsv.read_csv(path, parse_options=parse)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ReadError(f"read_reference(): cannot read {path.name} as a table ({exc}).") from None


def _symbols(table: pa.Table, by_name: dict[str, str], order: np.ndarray) -> np.ndarray | None:
    """The table's beat labels (as text, in ``order``), or None when it has no label column."""
    name = next((by_name[n] for n in SYMBOL_COLUMNS if n in by_name), None)
    if name is None:
        return None
    labels = table.column(name).cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False)
    return np.asarray(labels, dtype=str)[order]


def read_reference(path: str | os.PathLike[str]) -> ReferenceBeats:
    """Reference R peaks from a WFDB annotation file (``100.atr``, beats only) or a CSV/TSV/Parquet table."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in EDF_SUFFIXES:
        onsets, texts = read_edf_annotations(p)
        beat = np.isin(np.char.strip(texts), sorted(BEAT_SYMBOLS))
        if not beat.any():
            raise ReadError(
                f"read_reference(): {p.name} holds no beat annotations (EDF+ annotations labelled with a beat "
                f"symbol: N, L, R, A, V, F, ...); it has {onsets.size} other annotation(s)."
            )
        return ReferenceBeats(None, onsets[beat], p.name, np.char.strip(texts[beat]))
    if suffix not in CSV_DELIMITERS and suffix not in PARQUET_SUFFIXES:
        annotations = read_beat_annotations(p)
        if not annotations.samples.size:
            raise ReadError(
                f"read_reference(): {p.name} holds no beat annotations (WFDB annotations with a beat symbol: "
                f"N, L, R, A, V, F, ...); it has {annotations.n_other} other annotation(s), "
                "such as rhythm changes or noise. Give the record's beat annotations (often its .atr file)."
            )
        return ReferenceBeats(annotations.samples, None, p.name, annotations.symbols.astype(str))
    if not p.exists():
        raise ReadError(f"read_reference(): reference file not found: {p}.")
    table = _table(p)
    if table.num_rows == 0:  # (its empty column had been "null with 0 empty value(s)")
        raise ReadError(f"read_reference(): {p.name} lists no beat; give a reference with one beat a row.")
    by_name = {name.strip().lower(): name for name in table.column_names}
    for wanted, as_samples in [(n, True) for n in SAMPLE_COLUMNS] + [(n, False) for n in TIME_COLUMNS]:
        if wanted not in by_name:
            continue
        column = table.column(by_name[wanted])
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)) or column.null_count:
            raise ReadError(
                f"read_reference(): column {by_name[wanted]!r} of {p.name} must hold numbers without gaps; "
                f"it holds {column.type} with {column.null_count} empty value(s)."
            )
        order = np.argsort(column.to_numpy(), kind="stable")
        values = column.to_numpy()[order]
        symbols = _symbols(table, by_name, order)
        if values.size and values[0] < 0:
            raise ReadError(f"read_reference(): column {by_name[wanted]!r} of {p.name} has negative positions.")
        if as_samples:
            if not np.all(np.equal(np.mod(values, 1), 0)):
                raise ReadError(
                    f"read_reference(): column {by_name[wanted]!r} of {p.name} holds fractions, not sample indices; "
                    "name a column of seconds 'time_s'."
                )
            return ReferenceBeats(values.astype(np.int64), None, p.name, symbols)
        return ReferenceBeats(None, values.astype(np.float64), p.name, symbols)
    raise ReadError(
        f"read_reference(): {p.name} has no column of R peaks; its columns are {table.column_names}. "
        f"Name one {SAMPLE_COLUMNS[0]!r} (sample indices) or {TIME_COLUMNS[0]!r} (seconds)."
    )


#: Column names read as the listed windows' times (dates or timestamps), and as their kinds (any case).
DAY_COLUMNS = ("day", "date", "start", "datetime", "timestamp", "time")
KIND_COLUMNS = ("kind", "label", "type", "class")


@dataclass(frozen=True)
class ReferenceDays:
    """Listed anomalous times of a load series (days, or any moment inside a window).

    ``times`` : ``datetime64[ns]`` array of shape ``(n,)``, sorted; ``kinds`` : str array of
    shape ``(n,)``, each time's kind (``"outage"``, ``"spike"``, ...; ``"listed"`` where the
    file names none); ``source`` : the file's name.
    """

    times: np.ndarray
    kinds: np.ndarray
    source: str


def read_reference_days(path: str | os.PathLike[str]) -> ReferenceDays:
    """Anomalous days from a CSV/TSV/Parquet table such as the simulator's ``NAME.truth.csv``:
    a column of dates or ISO 8601 times (named one of :data:`DAY_COLUMNS`, else the first column
    of dates or times) and, optionally, a column of kinds (one of :data:`KIND_COLUMNS`)."""
    p = Path(path)
    if p.suffix.lower() not in CSV_DELIMITERS and p.suffix.lower() not in PARQUET_SUFFIXES:
        raise ReadError(
            f"the reference {p.name} is not a table of days; give a CSV, TSV or Parquet file with a column 'day'."
        )
    if not p.is_file():
        raise ReadError(f"reference file not found: {p}.")
    table = _table(p)
    by_name = {name.strip().lower(): name for name in table.column_names}
    dated = [n for n in table.column_names if pa.types.is_timestamp(table.column(n).type)]
    dated += [n for n in table.column_names if pa.types.is_date(table.column(n).type)]
    name = next((by_name[n] for n in DAY_COLUMNS if n in by_name), None) or next(iter(dated), None)
    if name is None:
        raise ReadError(
            f"the reference {p.name} has no column of days; its columns are {table.column_names}. "
            "Name one 'day' and write each anomalous day as YYYY-MM-DD."
        )
    if table.num_rows == 0:
        raise ReadError(f"the reference {p.name} lists no days; give at least one row.")
    # (the days on the clock where the series was recorded, as its windows are: read_series(wall_clock=True))
    times = times_from_arrow(
        table.column(name), name, p.name, caller="read_reference_days()", what="column", wall_clock=True
    )
    order = np.argsort(times, kind="stable")
    kind_name = next((by_name[n] for n in KIND_COLUMNS if n in by_name), None)
    if kind_name is None:
        kinds = np.full(times.size, "listed")
    else:
        text = table.column(kind_name).cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False)
        kinds = np.asarray([k.strip() or "listed" for k in text], dtype=str)
    return ReferenceDays(times[order], kinds[order], p.name)
