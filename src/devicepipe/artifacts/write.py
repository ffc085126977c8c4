"""Writing a run's beat tables and ``summary.json``, each file atomically.

The pipelines hand host copies of their results to these writers and never write files
themselves. ``beats.parquet`` (one row per R peak found) is written by :func:`write_beat_files`
for every ECG run, in parts (the R peaks of a long recording may be held on disk); the other
files by their declarations in :mod:`devicepipe.artifacts`; ``summary.json`` by
:func:`write_summary`, always last, so that a run directory without it is an interrupted run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.artifacts.summaries import RunSummary
from devicepipe.core.spill import Stored
from devicepipe.heart.rate import hrv, hrv_stored, nn_intervals
from devicepipe.heart.spectral import hrv_frequency
from devicepipe.io import Recording, write_beat_annotations, write_csv, write_json, write_parquet
from devicepipe.io.read import recording_files

#: Rows of a beat table built and written at a time.
TABLE_PART = 16_384

__all__ = [
    "SUMMARY_SCHEMA",
    "input_summary",
    "heart_rate_summary",
    "write_beat_files",
    "write_summary",
]


def input_summary(source: Any, rec: Recording, device: torch.device, *, channel_key: str = "channel") -> dict[str, Any]:
    """The ``summary.json`` fields that say what was read, where it ran, and how long it is."""
    return {
        "input": str(source) if isinstance(source, (str, Path)) else type(source).__name__,
        channel_key: rec.channels[0],
        "device": str(device),
        "sampling_rate_hz": rec.sampling_rate,
        "n_samples": rec.n_samples,
        "non_finite_values": {"count": rec.n_nan, "policy": rec.nan_policy},
        **({} if rec.stated_rate is None else {"stated_sampling_rate_hz": rec.stated_rate}),
        **({"input_files": input_files(source)} if isinstance(source, (str, Path)) else {}),
    }


def input_files(source: str | Path) -> list[dict[str, Any]]:
    """The files a recording's path names (a WFDB record: its header and signal file), each with
    its size and time of change: what a resumed folder run compares to tell a file replaced since."""
    out = []
    for file in recording_files(Path(source)):
        try:
            stat = file.stat()
        except OSError:
            continue
        out.append({"name": file.name, "bytes": stat.st_size, "modified_ns": stat.st_mtime_ns})
    return out


def write_beat_files(
    out: Path,
    record: str,
    peaks: np.ndarray | Stored,
    kept: np.ndarray | Stored,
    sampling_rate: float,
    *,
    scores: np.ndarray | None = None,
    flags: np.ndarray | None = None,
    quality: tuple[np.ndarray | Stored, np.ndarray | Stored] | None = None,
    classes: tuple[np.ndarray, np.ndarray] | None = None,
    rhythms: np.ndarray | None = None,
) -> dict[str, Path]:
    """Every R peak found, in three forms: ``beats.parquet`` (the sampling rate in its metadata),
    ``beats.csv``, and the WFDB annotation file ``<record>.qrs`` (see
    :func:`devicepipe.io.write_beat_annotations`; none when no beat was found).

    Columns: each peak's sample, time (s), the RR interval before it (s, NaN for the first),
    whether segmentation kept it, with ``quality`` its correlation with the typical beat and the
    median of that over its stretch (``quality``, ``stretch_quality``; NaN where not kept; see
    :func:`devicepipe.ecg.beat_quality`), with ``classes`` its AAMI class and why (``class``,
    ``reason``; see :func:`devicepipe.ecg.ecg_classes`), and, for a learning run, its score (NaN
    where not kept) and flag. Every array has shape ``(n_peaks,)``. The annotation file gives
    each beat its class as its symbol, and ``rhythms`` (each beat's, ``(N``, ``(AFIB``, ...)
    as rhythm annotations where it changes.
    """

    def parts() -> Iterator[dict[str, Any]]:
        """The table :data:`TABLE_PART` rows at a time (a week's beats hold no full-length temporaries)."""
        for s in range(0, max(1, peaks.size), TABLE_PART):
            e = min(peaks.size, s + TABLE_PART)
            own = peaks[s:e]
            before = peaks[s - 1 : e] if s > 0 else np.concatenate([[np.nan], peaks[:e]])
            columns: dict[str, Any] = {
                "peak": own,
                "time_s": own / sampling_rate,
                "rr_s": np.diff(before.astype(np.float64)) / sampling_rate,
                "kept": kept[s:e],
            }
            if quality is not None:
                columns.update(quality=quality[0][s:e], stretch_quality=quality[1][s:e])
            if classes is not None:
                columns.update({"class": classes[0][s:e], "reason": classes[1][s:e]})
            if scores is not None and flags is not None:
                columns.update(score=scores[s:e], flagged=flags[s:e])
            yield columns

    files = {
        "beats.parquet": write_parquet(parts(), out / "beats.parquet", sampling_rate=sampling_rate),
        "beats.csv": write_csv(parts(), out / "beats.csv"),
    }
    symbols = None if classes is None else classes[0]
    qrs = write_beat_annotations(
        out, record, peaks, sampling_rate, scores=scores, flags=flags, symbols=symbols, rhythms=rhythms
    )
    if qrs is not None:
        files[qrs.name] = qrs
    return files


def heart_rate_summary(
    peaks: torch.Tensor | Stored, sampling_rate: float, classes: np.ndarray | None = None
) -> dict[str, Any] | None:
    """``summary.json``'s heart rate and HRV (cleaned NN intervals; see :mod:`devicepipe.heart.rate`)
    of R peaks in memory or held on disk (read a part at a time), or None with fewer than three
    beats. With each beat's AAMI class (``classes``, ``(n,)``), the time domain and the spectrum
    take only the intervals between two N beats (ectopic beats and the intervals around them left
    out), as the Task Force (1996) defines normal-to-normal intervals."""
    if len(peaks) < 3:
        return None
    between_n = None if classes is None else (classes[1:] == "N") & (classes[:-1] == "N")
    if isinstance(peaks, torch.Tensor):
        mask = None if between_n is None else torch.from_numpy(between_n)
        measures = hrv(peaks, sampling_rate, normal=mask)
    else:
        measures = hrv_stored(peaks, sampling_rate, normal=between_n)
    every = peaks if isinstance(peaks, torch.Tensor) else torch.from_numpy(np.asarray(peaks[:]))
    rr, kept, _, _ = nn_intervals(every.cpu(), sampling_rate)
    times = every[1:].cpu().numpy() / float(sampling_rate)
    normal = kept.numpy() if between_n is None else kept.numpy() & between_n
    spectral = hrv_frequency(rr.numpy(), times, normal)
    cleaning = "0.3-2 s, within 20 % of the neighbours' median"
    return {
        "nn_cleaning": cleaning + ("" if classes is None else "; only intervals between two N beats"),
        **measures.to_dict(),
        "frequency": _spectral(spectral, classes is not None),
    }


def _spectral(spectral: Any, classed: bool) -> dict[str, Any] | None:
    """``heart_rate.frequency``: the spectrum, its method saying which intervals it took."""
    if spectral is None:
        return None
    out = spectral.to_dict()
    if classed:
        out["method"] += "; only intervals between two N beats (ectopic beats and those around them left out)"
    return out


#: The version of ``summary.json``'s layout (its ``schema`` key), raised when a key that a reader may
#: rely on is renamed, removed or changes type or meaning (tests/contract pins the layout of every
#: pipeline's). 2: ``quality.beats_poor`` counts the beats in stretches of poor signal only (1: also
#: every beat unlike the typical one, ectopic beats included); ``beats_unlike_typical`` counts those.
SUMMARY_SCHEMA = 2


def write_summary(
    out: Path, summary: RunSummary | Mapping[str, Any], files: dict[str, Path], *, replaces: Sequence[str] = ()
) -> RunSummary:
    """Write ``summary.json`` (call it last): ``summary`` with its :data:`SUMMARY_SCHEMA` and
    every file of the run listed; then remove the files of the run it ``replaces`` (see
    :func:`remove_stale`) that this one did not write. Return the summary as written."""
    typed = summary if isinstance(summary, RunSummary) else RunSummary.from_dict(summary)
    typed = typed.replace(schema=SUMMARY_SCHEMA, files=sorted(p.name for p in files.values()))
    write_json(typed.to_dict(), out / "summary.json")
    remove_stale(out, replaces, typed.files)
    return typed


#: Files of an earlier run that a new run in its directory never removes: what cost training.
KEPT_FILES = frozenset({"model.pt", "checkpoint.pt", "ensemble.pt"})


def earlier_files(out: Path) -> tuple[str, ...]:
    """The files the run in ``out`` listed in its ``summary.json`` (none where there is none, or
    it does not read as one): what a new run there replaces."""
    try:
        listed = json.loads((Path(out) / "summary.json").read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        return ()
    return tuple(name for name in listed if isinstance(name, str))


def remove_stale(out: Path, earlier: Sequence[str], now: Sequence[str]) -> list[str]:
    """Remove from ``out`` the files an ``earlier`` run listed that the run now there did not
    write (``now``), so that a directory holds one run: never a file it did not list, a path
    outside ``out``, or one of :data:`KEPT_FILES`. The names removed."""
    removed = []
    for name in sorted(set(earlier) - set(now) - KEPT_FILES):
        path = Path(out) / name
        if Path(name).name == name and name not in ("", ".", "..") and path.is_file() and not path.is_symlink():
            path.unlink()
            removed.append(name)
    return removed
