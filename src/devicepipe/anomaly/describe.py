"""A fitted detector's score and scorer in words: for summaries, reports and the command line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devicepipe.anomaly.neighbours import SMALL_SET, local_neighbours, row_pyramid
from devicepipe.learn import (
    DISTANCE_SCORERS,
    PYRAMID_SCORERS,
)


def score_meaning(det: BeatAnomalyDetector, rows: str = "a row", units: str = "scaled values") -> str:
    """What a score of this fitted detector is, in words, for ``rows`` (e.g. "a beat
    standardised by its recording's beats") whose values are in ``units``."""
    det._check_fitted("score_meaning()")
    recon = f"the mean squared reconstruction error of {rows} (units: squared {units})"
    if det.scorer == "reconstruction":
        return f"a score is {recon}"
    m = det.reference_.shape[0]
    if det.scorer in PYRAMID_SCORERS:
        widths = ", ".join(str(level.shape[1]) for level in row_pyramid(det.reference_[:1], det._floor))
        skip = det.neighbours_ - 1
        past = f" past the {skip} nearest" if skip else ""
        distance = (
            f"the distance from it to the nearest weighted mean of its {local_neighbours(m)} nearest{past} of "
            f"{m:,} training rows at that resolution (the weights solved as locally linear embedding solves them)"
            if det.scorer == "local"
            else f"its mean Euclidean distance to its {det.neighbours_} nearest of {m:,} training rows at that "
            "resolution"
        )
        return (
            f"a score is the largest, over {rows} at {widths} samples (averaged down by halves), of {distance}, "
            "each as a robust z-score against the training rows' own values there (units: robust standard "
            "deviations of the log distance)"
        )
    knn = (
        f"the mean Euclidean distance from {rows} to its {det.neighbours_} nearest of {m:,} training rows "
        f"(units: {units})"
    )
    if det.scorer == "knn":
        return f"a score is {knn}"
    return f"a score is the mean of two robust z-scores against the training rows: of {recon}, and of {knn}"


def scorer_summary(det: BeatAnomalyDetector, reason: str | None = None) -> dict[str, Any]:
    """Which scorer scored the rows, with what, and why (``reason``: the caller's, first): for a
    run's ``summary.json``."""
    det._check_fitted("scorer_summary()")
    rows = det.fit_rows_["rows"]
    held = det.fit_rows_["held_out"]
    out: dict[str, Any] = {"scorer": det.scorer, "training_rows": rows, "held_out_for_stopping": held}
    why = [] if reason is None else [reason]
    if det.scorer != "reconstruction":
        out |= {"neighbours": det.neighbours_, "reference_rows": int(det.reference_.shape[0])}
        if det.scorer == "local":
            out["local_neighbours"] = local_neighbours(det.reference_.shape[0])
            out["local_past_nearest"] = det.neighbours_ - 1
        if det.neighbours == "auto":
            m = det.reference_.shape[0]
            why.append(
                f"k = floor({det._share:g} x {m:,} reference rows) + 1 = {det.neighbours_}: "
                "a group of similar anomalous training rows up to that share cannot vouch for itself"
            )
    if det.scorer in DISTANCE_SCORERS:
        why.append(
            "distances to the training rows ranked anomalies better than the reconstruction error on every "
            "one-class task measured (benchmarks/one_class.py), and need no model to have learned normal"
        )
    if det.scorer in PYRAMID_SCORERS:
        why.append(
            "at several resolutions: some anomalies differ in fine detail, others in a coarse shape that "
            "noise hides at full resolution; each resolution is calibrated on the training rows' own distances"
        )
    if det.scorer == "local":
        why.append(
            "by the local linear reconstruction error: a row off the shapes the normal rows vary along scores "
            "high even when some normal rows are near it, and a row between normal rows scores low even where "
            "none is near it; it is rebuilt from the rows past its k - 1 nearest, so that a few copies of one "
            "unusual row cannot rebuild each other"
        )
    if rows < SMALL_SET:
        tail = (
            "the scores use every row (each leaves itself out)"
            if det.scorer in DISTANCE_SCORERS
            else "reconstruction errors of a model trained on so few rows are a weak score; scorer='knn' is the "
            "better choice here"
        )
        why.append(
            f"{rows} training rows is a small set (under {SMALL_SET}): {held} of them were held out to stop "
            f"training, and {tail}"
        )
    out["why"] = why
    return out


if TYPE_CHECKING:
    from devicepipe.anomaly.estimator import BeatAnomalyDetector
