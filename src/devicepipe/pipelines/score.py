"""``run_score``: the beats of a new recording scored with a model trained earlier."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from devicepipe.anomaly import BeatAnomalyDetector
from devicepipe.artifacts import Made, write_artifacts
from devicepipe.artifacts.summaries import RunSummary
from devicepipe.artifacts.write import (
    heart_rate_summary,
    input_summary,
    write_summary,
)
from devicepipe.core.device import resolve_device
from devicepipe.ecg import (
    beat_quality,
)
from devicepipe.io import (
    Recording,
)
from devicepipe.io.timeline import NanPolicy
from devicepipe.io.write import holds_output
from devicepipe.learning.score import reconstruct
from devicepipe.pipelines.checks import rate_warnings, time_warnings
from devicepipe.pipelines.classes import label_beats
from devicepipe.pipelines.context import Progress, Run, start
from devicepipe.pipelines.ecg import flagged_beat_rows, scored_beat_files
from devicepipe.pipelines.learning import beat_rows, fitted_model, model_rows, model_summary
from devicepipe.pipelines.model_fit import failed_model_warnings, flag_share_warnings, rate_fit_warnings
from devicepipe.pipelines.reading import no_beats, read_and_cut
from devicepipe.pipelines.results import LearnResult
from devicepipe.pipelines.scored import (
    Scored,
    beat_counts,
    beat_places,
    flagged_beats,
    label_with_reference,
    labelled_reference,
    reference_summary,
    score_views,
    views_on_host,
)
from devicepipe.report import REPORT_NAME, write_report
from devicepipe.signal.resample import resample_rows


@holds_output
def run_score(
    source: Any,
    out: str | Path,
    *,
    model: str | Path | BeatAnomalyDetector,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    device: str | torch.device = "auto",
    reference: str | Path | None = None,
    nan: NanPolicy = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    count_transfers: bool = True,
) -> LearnResult:
    """Score every beat of an ECG with a model trained earlier (by ``ecg`` or ``train``), against
    the model's own threshold.

    The beats are found and cut as the model's were (its ``geometry_``: detector, segmentation,
    window), resampled to its width and standardised by this recording's own beats, so a model
    takes recordings of any sampling rate and gain. Each beat gets its score, flag (score
    above the model's threshold) and tail probability (the share of the model's training
    beats scoring at least as high). ``reference`` labels the beats as in :func:`run_ecg`;
    the summary then gives the flag rate per label and per AAMI class.

    Writes to ``out``: ``beats.parquet``/``.csv`` and ``RECORD.qrs`` (scores and flags),
    ``scores.parquet`` (peak, time, latent means, score, flag, spread, tail probability),
    ``scores.png``, ``latent.png``, ``extremes.png``, ``excerpt.png``, ``heart_rate.png``,
    ``report.html``, and ``summary.json`` last.
    """
    dev = resolve_device(device)
    detector = fitted_model(model, dev, "ecg-beats")
    geometry = detector.geometry_
    ref = labelled_reference(reference, "score")
    run = start(out, dev, count_transfers, progress)
    every, rec, peaks, beats, leads = read_and_cut(
        run, source, channel, sampling_rate, geometry["method"], geometry["mode"], nan, encoding
    )
    if beats.matrix.shape[0] == 0:
        raise no_beats(rec, peaks)
    labelled = label_beats(run, every, peaks)
    with run.stage("scale"):
        # as the model's rows were made (older models: neither levelled nor aligned)
        level, align = bool(geometry.get("baseline")), bool(geometry.get("aligned"))
        width = detector.n_features_in_
        data = beat_rows(model_rows(beats, rec.samples, width, level=level, align=align), width)
    with run.stage("score"):
        scores = detector.score_details(data)
        views = score_views(scores, data)
        prepared = resample_rows(data[views["extreme_idx"]], detector.width_)
        views |= {"extreme_rows": prepared, "extreme_recon": reconstruct(detector.models_[0], prepared)}
        tail = detector.tail_of(scores.scores)
    with run.stage("transfer"):
        trained = detector.train_scores_.detach().cpu().numpy()
        rows = replace(scores.to_host(), tail=tail.detach().cpu().numpy(), train_scores=trained)
        places = beat_places(peaks, beats)
        shown = views_on_host(views)
        signal = rec.samples.cpu().numpy()
    fs = rec.fs
    with run.stage("hrv"):
        heart_rate = heart_rate_summary(peaks, fs, labelled.classes.labels)
    if ref is not None:
        places = label_with_reference(places, ref, rec)
    scored = Scored(rows, shown, places)
    with run.stage("write"):
        files, leading = scored_beat_files(run, rec, scored, beat_quality(beats), labelled)
        made = Made(
            "score", run.out, rows, shown, places, rec=rec, signal=signal, threshold=detector.threshold_,
            leading=leading, beat_rate=detector.width_ / beats.window_s, reference=places.reference_peaks,
            classes=labelled.classes.labels, events=labelled.holter.events,
        )  # fmt: skip
        files.update(write_artifacts(made))
    summary = {**_score_summary(source, rec, run, detector, scored, heart_rate), **leads, "holter": labelled.summary()}
    if ref is not None:
        summary |= reference_summary(ref, rec, scored)
    page = flagged_beat_rows(scored, fs)
    typed = RunSummary.from_dict(summary)
    files[REPORT_NAME] = write_report(run.out, "score", typed, files, flagged=page)
    typed = write_summary(run.out, typed, files, replaces=run.earlier)
    files["summary.json"] = run.out / "summary.json"
    return LearnResult(run.out, typed, files)


def _score_summary(
    source: Any,
    rec: Recording,
    run: Run,
    detector: BeatAnomalyDetector,
    scored: Scored,
    heart_rate: dict[str, Any] | None,
) -> dict[str, Any]:
    """``summary.json`` of a scored recording, but its reference counts."""
    return {
        **input_summary(source, rec, run.device),
        "model": model_summary(detector, "training_beats"),
        "heart_rate": heart_rate,
        "counts": beat_counts(scored.places, scored.rows),
        "threshold": detector.threshold_,
        "threshold_means": (
            f"the model's own threshold, {detector.threshold_rule}; "
            + detector.score_meaning("a beat standardised by this recording's beats", "standard deviations")
        ),
        "scorer": detector.scorer_summary(),
        "flag_rate": float(scored.rows.flags.mean()),
        "flagged": flagged_beats(scored.places, scored.rows, rec.fs),
        "seconds": run.timer.seconds,
        "transfers": run.timer.transfers(),
        "threads": detector.threads_.to_dict(),
        "warnings": rate_warnings(scored.places.all_peaks, rec.fs, rec.n_samples)
        + time_warnings(rec)
        + rate_fit_warnings(detector.geometry_, rec.fs)
        + flag_share_warnings(detector, scored.rows.flags)
        + failed_model_warnings(detector),
    }
