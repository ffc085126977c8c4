"""WFDB records (PhysioNet's format) and their beat annotations, through the ``wfdb`` package.

``wfdb`` (and the pandas it imports: a fifth of a second together) is imported where a record is
first read or an annotation file written, not with this module: the process of a command that
hands its recordings to a cluster's workers does not wait for it (the workers have it already,
see :mod:`devicepipe.startup.preload`).
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from devicepipe.core.errors import ReadError
from devicepipe.core.interop import convert
from devicepipe.io.raw import ColumnSpec, RawSeries, column_list, resolve_names
from devicepipe.io.wfdb_plain import PlainHeader, plain_header, read_plain, signal_bytes
from devicepipe.io.write import atomic_path

if TYPE_CHECKING:
    import wfdb

    from devicepipe.core.spill import Stored

__all__ = [
    "wfdb_sampling_rate",
    "BEAT_SYMBOLS",
    "DETECTOR_EXTENSION",
    "WFDB_SUFFIXES",
    "BeatAnnotations",
    "is_wfdb_record",
    "read_beat_annotations",
    "read_wfdb",
    "record_base",
    "wfdb_signal_names",
    "write_beat_annotations",
]

#: WFDB annotation symbols that mark a beat (the PhysioNet/EC57 convention).
BEAT_SYMBOLS = frozenset("NLRBAaJSVrFejnE/fQ?")
#: Extension of the beat annotations a run writes (``100.qrs``), as QRS detectors' files are named.
DETECTOR_EXTENSION = "qrs"
#: Suffixes that name a WFDB record (or one of its files).
WFDB_SUFFIXES = frozenset({".hea", ".dat", ".atr"})


def record_base(path: Path) -> Path:
    """A WFDB record's path without a suffix (``mitdb/100`` for ``mitdb/100.hea``), as wfdb takes it."""
    return path.with_suffix("") if path.suffix.lower() in WFDB_SUFFIXES else path


def import_wfdb() -> ModuleType:
    """The ``wfdb`` module, imported (at its first use: it imports pandas) without the warnings of
    its own use of a pandas feature pandas 3 deprecates, which are not the user's to act on.
    Imported once, it is the module already loaded (a warnings context per call costs a short
    record's read more than its samples do)."""
    loaded = sys.modules.get("wfdb")
    if loaded is not None:
        return loaded
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"The inplace keyword in DataFrame\.set_index")
        import wfdb

    return wfdb


def is_wfdb_record(path: Path) -> bool:
    """Whether ``path`` names a WFDB record: one of its files, or its name with a ``.hea`` beside it."""
    return path.suffix.lower() in WFDB_SUFFIXES or (not path.exists() and path.with_name(path.name + ".hea").exists())


def wfdb_sampling_rate(path: Path) -> float | None:
    """The sampling rate in a WFDB record's header (None where the header cannot be read)."""
    wfdb = import_wfdb()

    head = plain_header(record_base(path))
    if head is not None:
        return head.fs
    try:
        fs = float(wfdb.rdheader(str(record_base(path))).fs)
    except Exception:  # noqa: BLE001 - read_wfdb says what is wrong with it
        return None
    return fs if header_rate_holds(record_base(path)) else None


def wfdb_signal_names(path: Path) -> list[str]:
    """The signal names in a WFDB record's header (raises what wfdb raises for a bad header)."""
    wfdb = import_wfdb()

    head = plain_header(record_base(path))
    return list(head.names) if head is not None else list(wfdb.rdheader(str(record_base(path))).sig_name or [])


def read_wfdb(path: Path, column: ColumnSpec, start: int = 0, stop: int | None = None) -> RawSeries:
    """The chosen channels (default: all) of a WFDB record, in physical units, with its rate;
    samples ``[start, stop)`` only."""
    wfdb = import_wfdb()

    base = record_base(path)
    wanted = column_list(column)
    head = plain_header(base)
    if head is not None:  # most records: read without wfdb's slow header parse (see devicepipe.io.wfdb_plain)
        chosen = None if wanted is None else resolve_names(wanted, head.names, "channel", base.name)
        plain = read_plain(head, chosen, start, stop, base.name)
        if plain is not None:
            return plain
        _refuse_a_cut_signal_file(head, base)
    elif not base.with_name(base.name + ".hea").exists():
        raise ReadError(f"read_series(): WFDB header not found: {base}.hea.")
    if wanted is None or all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) and i >= 0 for i in wanted):
        # channels by position: one read (wfdb.rdrecord parses the header itself, and the header
        # parse is most of a short record's cost); any failure is explained by the checked read below
        try:
            rec = wfdb.rdrecord(str(base), channels=wanted, return_res=32, sampfrom=start, sampto=stop)
        except Exception:  # noqa: BLE001 - the checked read says what is wrong
            pass
        else:
            return _raw(rec, base)
    if record_line(base) == "":  # (wfdb's own error for it: "list index out of range")
        raise ReadError(
            f"read_series(): the WFDB header {base.name}.hea holds no record line (it is empty, or only comments); "
            "is it the whole file?"
        )
    try:
        head = wfdb.rdheader(str(base))
    except Exception as exc:
        raise ReadError(f"read_series(): cannot read WFDB header {base}.hea ({exc}).") from None
    names = list(head.sig_name or [])
    if not names and not head.n_sig:
        raise ReadError(f"read_series(): the header {base.name}.hea declares no signal; there is nothing to read.")
    if len(names) != int(head.n_sig or 0):
        raise ReadError(
            f"read_series(): the header {base.name}.hea declares {head.n_sig} signal(s) but describes "
            f"{len(names)}; it is incomplete (one line per signal: file, format, gain, ..., name)."
        )
    idx = list(range(len(names))) if wanted is None else resolve_names(wanted, names, "channel", base.name)
    try:
        length = int(head.sig_len or 0)
        if start >= length > 0:
            raise ReadError(f"read_series(): start={start} is past the end of {base.name} ({length:,} samples).")
        end = None if stop is None or (length and stop >= length) else stop
        rec = wfdb.rdrecord(str(base), channels=idx, return_res=32, sampfrom=start, sampto=end)
    except Exception as exc:
        raise ReadError(f"read_series(): cannot read WFDB record {base} ({exc}).") from None
    return _raw(rec, base)


def _refuse_a_cut_signal_file(head: PlainHeader, base: Path) -> None:
    """Refuse a plain record whose signal file is shorter than its header says (a copy or a
    download cut short), naming both sizes: wfdb's own read fails on it with an error of array
    shapes that says nothing of the file."""
    try:
        size = os.stat(head.file).st_size
    except OSError:
        return  # (a missing file: wfdb's read names it)
    needed = signal_bytes(head)
    if size < needed:
        raise ReadError(
            f"read_series(): the signal file {os.path.basename(head.file)} holds {size:,} bytes, but the header "
            f"{base.name}.hea says it holds {head.length:,} samples of {len(head.names)} signal(s) in format "
            f"{head.fmt}, {needed:,} bytes; is the file whole (a copy or download cut short)?"
        )


def _raw(rec: wfdb.Record, base: Path) -> RawSeries:
    values = convert(np.ascontiguousarray(rec.p_signal.T)).tensor
    n = values.shape[0]
    units = list(rec.units or [None] * n)
    fs = float(rec.fs) if header_rate_holds(base) else None
    return RawSeries(values, list(rec.sig_name[:n]), units, fs, None, base.name)


def record_line(base: Path) -> str | None:
    """A WFDB header's record line: its first line that is neither blank nor a comment ("" where
    it holds none; None where it cannot be read, which the read says more of)."""
    try:
        with open(base.with_name(base.name + ".hea"), encoding="latin-1") as fh:
            return next((ln for ln in fh if ln.strip() and not ln.lstrip().startswith("#")), "")
    except OSError:
        return None


def header_rate_holds(base: Path) -> bool:
    """Whether the rate in a WFDB header's record line (``NAME NSIG [FS[/COUNTER[(BASE)]] ...]``)
    is a positive number of Hz, or left out (WFDB's default of 250 Hz then holds). wfdb reads a
    rate it cannot parse (``-360``, ``abc``) as left out: such a header states no rate, and the
    rate must be given."""
    line = record_line(base)
    if not line:
        return True  # (read_wfdb says what is wrong with the header)
    fields = line.split()
    if len(fields) < 3:
        return True
    number = re.match(r"\d*\.?\d+(?:[eE][-+]?\d+)?", fields[2])
    return number is not None and float(number.group()) > 0


@dataclass(frozen=True)
class BeatAnnotations:
    """Reference beats of a WFDB annotation file.

    Attributes
    ----------
    samples : int64 NumPy array of shape ``(n_beats,)``, sorted.
    symbols : NumPy array of shape ``(n_beats,)``: each beat's label (``"N"``, ``"V"``, ``"A"`` ...).
    sampling_rate : Hz, from the annotation file (or its record's header).
    n_other : the file's annotations that are not beats (rhythm changes, noise, ...), left out.
    """

    samples: np.ndarray
    symbols: np.ndarray
    sampling_rate: float | None
    n_other: int = 0


def _ends_as_annotations(file: Path) -> bool:
    """Whether ``file`` is whole 16-bit words ending with the zero word that closes every WFDB
    annotation file (the WFDB library, wfdb-python and this project's writer all write it)."""
    size = file.stat().st_size
    if size < 2 or size % 2:
        return False
    with file.open("rb") as f:
        f.seek(-2, os.SEEK_END)
        return f.read(2) == b"\0\0"


def read_beat_annotations(path: str | os.PathLike[str], extension: str | None = None) -> BeatAnnotations:
    """Read the beat annotations of a WFDB record (non-beat annotations are left out).

    ``path`` is the annotation file (``100.atr``) or the record name (``100``, with
    ``extension`` defaulting to ``"atr"``).
    """
    wfdb = import_wfdb()

    p = Path(path)
    if extension is None:
        extension = p.suffix[1:] if p.suffix and p.suffix.lower() not in (".hea", ".dat") else "atr"
    base = p.with_suffix("") if p.suffix else p
    file = base.with_name(f"{base.name}.{extension}")
    if not file.exists():
        raise ReadError(f"read_beat_annotations(): annotation file not found: {file}.")
    if not _ends_as_annotations(file):
        raise ReadError(
            f"read_beat_annotations(): {file} is not a WFDB annotation file: it does not end with the end mark "
            "WFDB writes (a zero 16-bit word). Is it cut short, or another kind of file?"
        )
    try:
        with warnings.catch_warnings():  # (as import_wfdb: wfdb's own use of a pandas feature pandas 3 deprecates)
            warnings.filterwarnings("ignore", message=r"The inplace keyword in DataFrame\.set_index")
            ann = wfdb.rdann(str(base), extension)
    except Exception as exc:
        raise ReadError(f"read_beat_annotations(): cannot read {file} ({exc}).") from None
    symbols = np.asarray(ann.symbol)
    if ann.sample.size and int(np.min(ann.sample)) < 0:
        raise ReadError(
            f"read_beat_annotations(): {file} is not a WFDB annotation file (it gives negative sample positions)."
        )
    is_beat = np.isin(symbols, sorted(BEAT_SYMBOLS))
    order = np.argsort(ann.sample[is_beat], kind="stable")
    return BeatAnnotations(
        samples=ann.sample[is_beat][order].astype(np.int64),
        symbols=symbols[is_beat][order],
        sampling_rate=float(ann.fs) if ann.fs else None,
        n_other=int((~is_beat).sum()),
    )


#: Annotations encoded at a time when writing (the file is written block by block, so a long
#: recording's beats never become Python objects all at once).
ANNOTATION_BLOCK = 65_536
#: What wfdb writes after the special annotations at a file's start (its ``wr_ann_file``).
_END_SPECIAL = (0, 236, 255, 255, 255, 255, 1, 0)


def _type_codes(symbols: np.ndarray, typecodes: dict[str, int]) -> np.ndarray:
    """Each symbol's WFDB type code, ``(n,)``."""
    names, index = np.unique(symbols, return_inverse=True)
    return np.asarray([typecodes[str(name)] for name in names], dtype=np.int64)[index]


def _type_words(differences: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The bytes ``wfdb``'s ``field2bytes("samptype", [difference, symbol])`` gives a run of
    annotations (``differences`` from the one before, ``codes`` their type codes; ``(n,)`` each),
    all at once: the type word (the difference's low 10 bits, the code above them), after a SKIP
    (its word and the 32-bit difference, high half first) where the difference passes 1,023."""
    d = np.asarray(differences, dtype=np.int64)
    if d.size and int(d.max()) > 0x7FFFFFFF:  # (more than one SKIP: as wfdb writes it)
        from wfdb.io.annotation import field2bytes

        table = {int(c): int(c) for c in np.unique(codes)}
        return np.asarray(
            [
                b
                for sd, c in zip(d.tolist(), codes.tolist(), strict=True)
                for b in field2bytes("samptype", [sd, c], table)
            ],
            dtype=np.uint8,
        )
    skip = d > 1023
    rest = np.where(skip, 0, d)
    words = np.zeros((d.size, 8), dtype=np.int64)
    words[:, :6] = [0, 59 << 2, 0, 0, 0, 0]
    words[:, 2], words[:, 3], words[:, 4], words[:, 5] = (d >> 16) & 255, (d >> 24) & 255, d & 255, (d >> 8) & 255
    words[:, 6], words[:, 7] = rest & 255, ((rest & 768) >> 8) + 4 * np.asarray(codes, dtype=np.int64)
    used = np.ones((d.size, 8), dtype=bool)
    used[~skip, :6] = False
    return words[used].astype(np.uint8)


def _beats_with_more(
    n: int,
    values: np.ndarray | None,
    marked: np.ndarray | None,
    num: int,
    changes: np.ndarray | None,
    rhythm: str,
) -> list[int]:
    """The beats of a block (``n`` of them) whose annotation holds more than its type word: with
    a note each (``values``), where the rhythm changes (from ``rhythm`` before the block) or the
    flag does (from ``num``); the rest are written together by :func:`_type_words`."""
    if values is not None:
        return list(range(n))
    more = np.zeros(n, dtype=bool)
    if changes is not None:
        more |= changes != np.concatenate([[rhythm], changes[:-1]])
    if marked is not None:
        more |= marked.astype(np.int64) != np.concatenate([[num], marked[:-1].astype(np.int64)])
    return np.flatnonzero(more).tolist()


def write_beat_annotations(
    directory: str | os.PathLike[str],
    record: str,
    samples: np.ndarray | Stored,
    sampling_rate: float,
    *,
    scores: np.ndarray | None = None,
    flags: np.ndarray | None = None,
    extension: str = DETECTOR_EXTENSION,
    symbols: np.ndarray | None = None,
    rhythms: np.ndarray | None = None,
) -> Path | None:
    """Write beats as a WFDB annotation file ``directory/record.extension``: the bytes of
    ``wfdb.wrann``, encoded by wfdb's own field encoder a block of beats at a time.

    Every beat is ``N`` (a detected beat, type unknown), or its symbol in ``symbols`` (the AAMI
    classes ``N``, ``S``, ``V``, ``F``, ``Q`` are WFDB beat symbols). With ``rhythms`` (each beat's
    rhythm, ``(N``, ``(AFIB``, ...), a rhythm annotation (``+``, the rhythm in its ``aux_note``)
    precedes the first beat and every beat whose rhythm differs from the one before, as MIT-BIH's
    annotators write them. With ``scores``, each beat's anomaly
    score is its ``aux_note`` (``score 0.0123``; ``not scored`` for NaN); with ``flags``, a flagged beat has ``num`` 1
    and ``flagged`` in its note, others ``num`` 0. wfdb-python, the WFDB tools (``rdann``,
    ``bxb -r RECORD -a atr qrs``) and PhysioNet's viewers read it. Written atomically.

    ``wfdb.wrann`` builds Python objects for every annotation before it writes (about 230
    bytes a beat: 160 MB for a week's 700,000 beats); here at most :data:`ANNOTATION_BLOCK`
    beats are encoded at a time, the sample differences, ``num`` changes and notes carried
    across blocks exactly as ``wrann`` writes them (the same bytes, tested).

    ``samples`` are sample indices, shape ``(n_beats,)``, increasing: an array, or any sequence
    of them read in slices (say :class:`~devicepipe.core.spill.Stored`, peaks held on disk), as
    ``scores`` and ``flags`` may be too. Returns the file, or None when there are no beats (a
    WFDB annotation file cannot be empty).
    """
    from wfdb.io.annotation import Annotation, ann_label_table, field2bytes

    out = Path(directory)
    n = len(samples)
    if n == 0:
        return None
    typecodes = dict(zip(ann_label_table["symbol"], ann_label_table["label_store"], strict=True))
    head = Annotation(record, extension, sample=samples[:1], symbol=["N"], fs=float(sampling_rate)).calc_fs_bytes()
    final = out / f"{record}.{extension}"
    with atomic_path(final) as tmp, open(tmp, "wb") as f:
        f.write(np.asarray([*head, *_END_SPECIAL], dtype=np.uint8).tobytes())
        previous, num, rhythm = 0, 0, ""
        for first in range(0, n, ANNOTATION_BLOCK):
            words: list[int] = []
            chunks: list[np.ndarray] = []
            block = slice(first, min(n, first + ANNOTATION_BLOCK))
            own = np.asarray(samples[block], dtype=np.int64)
            if bool(np.any(np.diff(own) < 0)) or int(own[0]) < previous:
                raise ValueError("write_beat_annotations(): samples must be increasing and not negative.")
            marked = None if flags is None else np.asarray(flags[block], dtype=bool)
            values = None if scores is None else np.asarray(scores[block], dtype=np.float64)
            kinds = None if symbols is None else np.asarray(symbols[block]).astype(str)
            changes = None if rhythms is None else np.asarray(rhythms[block]).astype(str)
            codes = np.full(own.size, typecodes["N"]) if kinds is None else _type_codes(kinds, typecodes)
            done = 0  # beats of the block written; those between the ones below take only a type word
            for i in _beats_with_more(own.size, values, marked, num, changes, rhythm):
                if i > done:
                    chunks += [
                        np.asarray(words, dtype=np.uint8),
                        _type_words(np.diff(own[done:i], prepend=previous), codes[done:i]),
                    ]
                    words, previous = [], int(own[i - 1])
                done = i + 1
                sample = int(own[i])
                if changes is not None and changes[i] != rhythm:
                    rhythm = str(changes[i])
                    words += field2bytes("samptype", [sample - previous, "+"], typecodes)
                    if num:  # (a rhythm annotation is not flagged)
                        num = 0
                        words += field2bytes("num", num, typecodes)
                    words += field2bytes("aux_note", rhythm, typecodes)
                    previous = sample
                words += field2bytes("samptype", [sample - previous, "N" if kinds is None else kinds[i]], typecodes)
                previous = sample
                flagged = marked is not None and bool(marked[i])
                if marked is not None and int(flagged) != num:  # num is carried: written when it changes
                    num = int(flagged)
                    words += field2bytes("num", num, typecodes)
                if values is not None:
                    value = values[i]
                    note = f"{'flagged, ' if flagged else ''}score {value:.4g}" if np.isfinite(value) else "not scored"
                    words += field2bytes("aux_note", note, typecodes)
            chunks.append(np.asarray(words, dtype=np.uint8))
            if done < own.size:
                chunks.append(_type_words(np.diff(own[done:], prepend=previous), codes[done:]))
                previous = int(own[-1])
            f.write(np.concatenate(chunks).tobytes())
        f.write(bytes(2))  # the end of the file
    return final
