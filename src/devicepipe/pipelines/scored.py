"""Stages of the pipelines that score beats (:func:`~devicepipe.pipelines.run_ecg`,
:func:`~devicepipe.pipelines.run_score`): the rows the report shows, the reference labels, and the
summary's counts and flagged beats. Plain functions on tensors and arrays: no I/O, no printing."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.artifacts import BeatPlaces, RowViews, ScoredRows
from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import Beats, label_beats, neighbours_in_rows
from devicepipe.io import Recording
from devicepipe.io.reference import ReferenceBeats, read_reference
from devicepipe.learning.score import Scores
from devicepipe.pipelines.checks import detection_accuracy, missed_labels, reference_counts, reference_in
from devicepipe.report import MAX_FLAGGED_ROWS

__all__ = [
    "Scored",
    "beat_counts",
    "beat_places",
    "flag_reason",
    "flagged_beats",
    "label_with_reference",
    "reference_summary",
    "score_views",
    "views_on_host",
]


def score_views(scores: Scores, data: torch.Tensor) -> dict[str, torch.Tensor]:
    """What the report shows of scored rows ``data`` (shape ``(n, width)``), on their device:
    ``extreme_idx``, the five highest-scoring rows' positions then the five lowest's;
    ``top_flagged``, the flagged rows' positions by falling score (at most ``MAX_FLAGGED_ROWS``),
    and those rows, ``flagged_rows``; ``typical``, the median row."""
    order = torch.argsort(scores.scores)
    top_flagged = order.flip(0)[: int(scores.flags.sum())][:MAX_FLAGGED_ROWS]
    return {
        "extreme_idx": torch.cat([order[-5:], order[:5]]),
        "top_flagged": top_flagged,
        "flagged_rows": data[top_flagged],
        "typical": data.median(0).values,
    }


def labelled_reference(reference: str | Path | None, command: str) -> ReferenceBeats | None:
    """The reference beats, which ``command`` (``ecg``, ``score``) needs labelled, read before
    the run starts (None: no reference given)."""
    ref = None if reference is None else read_reference(reference)
    if ref is not None and ref.symbols is None:
        raise DevicepipeError(
            f"reference {ref.source} has no beat labels; {command} needs labelled beats (a WFDB annotation "
            "file, or a table with a 'symbol' column such as the simulator's truth file)."
        )
    return ref


def views_on_host(views: dict[str, torch.Tensor]) -> RowViews:
    """Host copies of :func:`score_views`' tensors (and a VAE's extras, named as
    :class:`~devicepipe.artifacts.RowViews`' fields), inside a run's "transfer" stage."""
    host = {name: t.detach().cpu().numpy() for name, t in views.items()}
    towards = host.pop("grid_towards", None)
    return RowViews(**host, grid_towards=-1 if towards is None else int(towards))


def beat_places(peaks: torch.Tensor, beats: Beats) -> BeatPlaces:
    """Host copies of where the rows cut from ``peaks`` (every R peak found, samples) are."""
    return BeatPlaces(
        all_peaks=peaks.detach().cpu().numpy(),
        peaks=beats.peaks.detach().cpu().numpy(),
        kept=beats.kept.detach().cpu().numpy(),
        neighbour_s=neighbours_in_rows(beats, peaks).detach().cpu().numpy(),
    )


def label_with_reference(places: BeatPlaces, ref: ReferenceBeats, rec: Recording) -> BeatPlaces:
    """``places`` with each kept beat labelled as its nearest reference beat within 150 ms
    (``truth``; "" where none is) and the reference's beats (``reference_peaks``, samples)."""
    reference = reference_in(ref, rec)
    truth = label_beats(reference, ref.symbols, places.peaks, rec.fs)
    return replace(places, reference_peaks=reference, truth=truth)


@dataclass(frozen=True)
class Scored:
    """Host copies of what a run that scores beats made: the model's answers on the beats'
    rows, what the figures and report show of them, and where the beats are."""

    rows: ScoredRows
    views: RowViews
    places: BeatPlaces


def reference_summary(ref: ReferenceBeats, rec: Recording, scored: Scored) -> dict[str, Any]:
    """``summary.json``'s ``reference`` (each label's beats, flagged and missed) and ``accuracy``
    (the detection's against the reference) of a run whose beats ``ref`` labelled."""
    places = scored.places
    assert ref.symbols is not None and places.reference_peaks is not None and places.truth is not None
    missed = missed_labels(places.reference_peaks, ref.symbols, places.all_peaks, rec.fs)
    return {
        "reference": reference_counts(ref.source, places.truth, scored.rows.flags, missed),
        "accuracy": detection_accuracy(ref, rec, places.all_peaks),
    }


def beat_counts(places: BeatPlaces, rows: ScoredRows) -> dict[str, int]:
    """``summary.json``'s counts: R peaks found, beats kept (their window inside the recording), flagged."""
    return {
        "beats_found": int(places.all_peaks.size),
        "beats_kept": int(places.peaks.size),
        "flagged": int(np.count_nonzero(rows.flags)),
    }


def flag_reason(offset_s: float) -> str:
    """Why a flagged beat's row differs, in words, from the offset (s) of a neighbouring beat whose
    QRS reaches into the row (:func:`devicepipe.ecg.neighbours_in_rows`; NaN: none does)."""
    if not np.isfinite(offset_s):
        return "its own shape"
    if offset_s > 0:
        return f"the next beat, {offset_s:.2f} s later, is inside its window"
    return f"the previous beat, {-offset_s:.2f} s earlier, is inside its window"


def flagged_beats(places: BeatPlaces, rows: ScoredRows, fs: float) -> list[dict[str, Any]]:
    """``summary.json``'s flagged beats, highest score first: peak (sample), time (s) and score;
    where the rows have them, the tail probability; where the beats were labelled by a
    reference, the label; where the neighbours are known, why (:func:`flag_reason`)."""
    flagged = np.flatnonzero(rows.flags)
    flagged = flagged[np.argsort(rows.scores[flagged])[::-1]]
    tail, truth, neighbour_s = rows.tail, places.truth, places.neighbour_s
    return [
        {"peak": int(places.peaks[i]), "time_s": float(places.peaks[i] / fs), "score": float(rows.scores[i])}
        | ({"tail_probability": float(tail[i])} if tail is not None else {})
        | ({"reference": str(truth[i])} if truth is not None else {})
        | ({"why": flag_reason(float(neighbour_s[i]))} if neighbour_s is not None else {})
        for i in flagged
    ]
