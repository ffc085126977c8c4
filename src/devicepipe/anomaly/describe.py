"""A fitted detector's score and scorer in words: for summaries, reports and the command line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devicepipe.scorers.neighbours import AUTO_K, FENCE_IQRS, SMALL_SET


def score_meaning(det: BeatAnomalyDetector, rows: str = "a row", units: str = "scaled values") -> str:
    """What a score of this fitted detector is, in words, for ``rows`` (e.g. "a beat
    standardised by its recording's beats") whose values are in ``units``."""
    det._check_fitted("score_meaning()")
    return det._kind.meaning(det._against, rows, units)


def threshold_rule(det: BeatAnomalyDetector) -> str:
    """The detector's threshold rule in words, with its least effect where its scorer measures one
    (for summaries and reports)."""
    if det.threshold is not None:
        rule = f"fixed at {float(det.threshold):g}"
    elif det.contamination == "auto":
        rule = (
            f"robust: exp(median + {AUTO_K:g} x 1.4826 x MAD) of the log scores of the training rows "
            "(the 99.87th percentile if they were normal)"
        )
    else:
        q = 100.0 * (1.0 - float(det.contamination))
        rule = (
            f"the {q:g}th percentile of the training rows' scores (contamination {float(det.contamination):g}), "
            f"raised to Tukey's far-out fence (upper quartile + {FENCE_IQRS:g} interquartile ranges"
            + ("" if det._kind.z_scores else ", of the log scores")
            + ") where that is higher, so that a share is flagged only where it stands out"
        )
    if det._kind.measures_effect and det.min_effect:
        rule += (
            f"; a row above it is flagged where, at the resolution where it stands out most, it differs from what "
            f"the training rows rebuild of it by at least {100 * det.min_effect:g} % of a typical row's shape "
            "(min_effect: a rare but small difference, such as the extremes of ordinary beat-to-beat variation "
            "on a quiet recording, is not flagged)"
        )
    return rule


def scorer_summary(det: BeatAnomalyDetector, reason: str | None = None) -> dict[str, Any]:
    """Which scorer scored the rows, with what, and why (``reason``: the caller's, first): for a
    run's ``summary.json``."""
    det._check_fitted("scorer_summary()")
    rows = det.fit_rows_["rows"]
    held = det.fit_rows_["held_out"]
    out: dict[str, Any] = {"scorer": det.scorer, "training_rows": rows, "held_out_for_stopping": held}
    out["model_learned_from_rows"] = det.fit_rows_.get("model", rows)  # an evenly spaced sample where fewer
    why = [] if reason is None else [reason]
    kind = det._kind
    if kind.uses_reference:
        assert det.reference_ is not None  # (a fitted detector whose scorer uses them holds its rows)
        out |= {"neighbours": det.neighbours_, "reference_rows": int(det.reference_.shape[0])}
        out |= kind.facts(det._against)
        if kind.measures_effect:
            out["min_effect"] = float(det.min_effect)
        if det.neighbours == "auto":
            m = det.reference_.shape[0]
            why.append(
                f"k = floor({det._share:g} x {m:,} reference rows) + 1 = {det.neighbours_}: "
                "a group of similar anomalous training rows up to that share cannot vouch for itself"
            )
    why.extend(kind.why())
    if rows < SMALL_SET:
        tail = (
            "the scores use every row (each leaves itself out)"
            if kind.leaves_self_out
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
