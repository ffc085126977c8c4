"""Stages of the pipelines that score beats (:func:`~devicepipe.pipelines.run_ecg`,
:func:`~devicepipe.pipelines.run_score`): the rows the report shows, the reference labels, and the
summary's counts and flagged beats. Plain functions on tensors and arrays: no I/O, no printing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import label_beats
from devicepipe.io import Recording
from devicepipe.io.reference import ReferenceBeats, read_reference
from devicepipe.learning.score import Scores
from devicepipe.pipelines.checks import reference_in
from devicepipe.report import MAX_FLAGGED_ROWS

__all__ = ["beat_counts", "flag_reason", "flagged_beats", "label_with_reference", "score_views"]


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


def label_with_reference(host: dict[str, np.ndarray], ref: ReferenceBeats, rec: Recording) -> None:
    """Give each kept beat (``host["peaks"]``) the label of its nearest reference beat within
    150 ms, as ``host["truth"]``; the reference beats (samples) are ``host["reference_peaks"]``."""
    host["reference_peaks"] = reference_in(ref, rec)
    host["truth"] = label_beats(host["reference_peaks"], ref.symbols, host["peaks"], rec.fs)


def beat_counts(host: dict[str, np.ndarray]) -> dict[str, int]:
    """``summary.json``'s counts: R peaks found, beats kept (their window inside the recording), flagged."""
    return {
        "beats_found": int(host["all_peaks"].size),
        "beats_kept": int(host["peaks"].size),
        "flagged": int(np.count_nonzero(host["flags"])),
    }


def flag_reason(offset_s: float) -> str:
    """Why a flagged beat's row differs, in words, from the offset (s) of a neighbouring beat whose
    QRS reaches into the row (:func:`devicepipe.ecg.neighbours_in_rows`; NaN: none does)."""
    if not np.isfinite(offset_s):
        return "its own shape"
    if offset_s > 0:
        return f"the next beat, {offset_s:.2f} s later, is inside its window"
    return f"the previous beat, {-offset_s:.2f} s earlier, is inside its window"


def flagged_beats(host: dict[str, np.ndarray], fs: float, *, tail: bool = False) -> list[dict[str, Any]]:
    """``summary.json``'s flagged beats, highest score first: peak (sample), time (s) and score;
    with ``tail``, the tail probability; with reference labels in ``host``, the label; with
    ``host["neighbour_s"]``, why (:func:`flag_reason`)."""
    flagged = np.flatnonzero(host["flags"])
    flagged = flagged[np.argsort(host["scores"][flagged])[::-1]]
    labelled = "truth" in host
    return [
        {"peak": int(host["peaks"][i]), "time_s": float(host["peaks"][i] / fs), "score": float(host["scores"][i])}
        | ({"tail_probability": float(host["tail"][i])} if tail else {})
        | ({"reference": str(host["truth"][i])} if labelled else {})
        | ({"why": flag_reason(float(host["neighbour_s"][i]))} if "neighbour_s" in host else {})
        for i in flagged
    ]
