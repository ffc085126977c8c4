"""``run_series`` and ``run_score_series``: a load series cut into windows, an autoencoder trained
on them, anomalous windows flagged; and a new series scored with that model."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.anomaly import BeatAnomalyDetector
from devicepipe.artifacts import Made, ScoredRows, write_artifacts
from devicepipe.artifacts.summaries import RunSummary
from devicepipe.artifacts.write import (
    input_summary,
    write_summary,
)
from devicepipe.core.device import resolve_device
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import format_duration, parse_duration
from devicepipe.io import (
    Recording,
    TimeReport,
    read_series,
)
from devicepipe.io.channels import time_column_of
from devicepipe.io.timeline import NanPolicy
from devicepipe.io.write import holds_output
from devicepipe.learning.learn import (
    DEFAULT_SCORER,
    LearnSettings,
    SeriesLearnSettings,
    check_before_start,
)
from devicepipe.learning.score import group_scores, reconstruct
from devicepipe.pipelines.context import (
    MIN_WINDOWS_TO_TRAIN,
    SERIES_HIDDEN,
    SERIES_WINDOW,
    EpochProgress,
    Progress,
    Run,
    start,
)
from devicepipe.pipelines.learning import finish, fitted_model, learn, make_detector, model_summary, run_identity
from devicepipe.pipelines.model_fit import failed_model_warnings, flag_share_warnings, scale_fit_warnings
from devicepipe.pipelines.results import LearnResult
from devicepipe.pipelines.series_days import (
    Listed,
    departure_words,
    flagged_entries,
    listed_windows,
    reference_days,
    reference_summary,
)
from devicepipe.report import MAX_FLAGGED_ROWS, REPORT_NAME, FlaggedRows, write_report
from devicepipe.signal.windows import Departures, Windows, departures, flat_windows, make_windows


def _load_times(source: Any, time_column: str | int | None, need: str) -> tuple[str | int | None, bool]:
    """A load series' time column: the one named, else a file's first column of times
    (:func:`~devicepipe.io.channels.time_column_of`), else None for an in-memory table (whose
    DatetimeIndex the read takes); and whether it was found rather than named. A file with no
    column of times is refused in one line that begins with ``need``."""
    found = time_column is None
    time_column = time_column_of(source) if found else time_column
    if time_column is None and isinstance(source, (str, os.PathLike)):
        where = f"found no column of times in {Path(source).name}"
        raise DevicepipeError(
            f"{need}: {where}",
            fix="pass {time_column=} (e.g. {time_column='Datetime'}).",
            param="time_column",
        )
    return time_column, found


def _read_load(
    run: Run,
    source: Any,
    column: str | int | None,
    times: tuple[str | int | None, bool],
    time_format: str | None,
    nan: NanPolicy,
    encoding: str | None,
) -> tuple[Recording, TimeReport]:
    """One value column of a load series onto the run's device, sorted by its times, duplicate
    times averaged; the recording and its time report. ``times``: :func:`_load_times`' answer
    (a column found rather than named is said)."""
    time_column, found = times
    if found and time_column is not None:
        run.note(f"times from column {time_column!r}; --time-column picks another")
    with run.stage("read"):
        rec = read_series(
            source,
            column,
            device=run.device,
            time_column=time_column,
            time_format=time_format,
            duplicates="mean",
            nan=nan,
            encoding=encoding,
            wall_clock=True,  # days and hours on the clock where it was recorded, not UTC's
        )
    if rec.samples.ndim != 1:
        problem = f"{rec.source} has {rec.n_channels} value columns"
        raise DevicepipeError(problem, fix="choose one with {column=}.", param="column")
    report = rec.time_report
    if report is None:
        raise DevicepipeError(
            f"the {rec.source} has no times: give a DataFrame with a DatetimeIndex, or name its column of times "
            "with time_column=."
        )
    run.note(f"read {report.summary()}; {rec.n_samples:,} time points after that")
    return rec, report


@holds_output
def run_series(
    source: Any,
    out: str | Path,
    *,
    column: str | int | None = None,
    time_column: str | int | None = None,
    time_format: str | None = None,
    window: str = SERIES_WINDOW,
    pointwise: bool = False,
    settings: LearnSettings | None = None,
    hidden: int = SERIES_HIDDEN,
    reference: str | Path | None = None,
    device: str | torch.device = "auto",
    nan: NanPolicy = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    epoch_progress: EpochProgress | None = None,
    count_transfers: bool = True,
) -> LearnResult:
    """Windows of a load series, MinMax scaling, the MLP autoencoder, anomalous windows.

    ``source``: a CSV or Parquet file, or an in-memory table (pandas, Polars, PyArrow). The
    times are ``time_column``'s; with none named, a file's first column of times
    (:func:`~devicepipe.io.channels.time_column_of`) or a pandas DataFrame's DatetimeIndex.
    Duplicate timestamps are averaged and gaps filled (up to two steps per window) or the
    window dropped, all reported in ``summary.json``. ``pointwise`` trains the notebook's
    per-sample autoencoder (input size 1) instead and scores each window by the mean error
    of its samples. Writes ``summary.json`` (last), ``embeddings.parquet`` (window start,
    latent code, score, flag, spread), ``checkpoint.pt`` (or ``ensemble.pt``),
    ``history.csv`` and figures (``training.png``, ``latent.png``, ``extremes.png``,
    ``days.png``). ``settings`` defaults to :class:`SeriesLearnSettings`.

    Each flagged window is said to be low (under like windows: an outage, a holiday, a stuck
    meter) or high (a demand extreme), by :func:`~devicepipe.signal.windows.departures`.
    ``reference`` (a table of days and kinds, such as the simulator's ``NAME.truth.csv``; see
    :func:`~devicepipe.io.read_reference_days`) scores the flags against its listed days:
    ``summary.json``'s ``window_reference`` and the report say which were flagged, per kind,
    each listed window's rank among the scores, and the flagged windows it does not list.
    """
    settings = settings or SeriesLearnSettings()
    window_s = parse_duration(window)
    _check_pointwise_scorer(settings, pointwise)
    time_column, found = _load_times(source, time_column, "a load series needs its time column")
    ref = reference_days(reference)
    run = start(out, device, count_transfers, progress)
    choices = {"column": column, "time_column": time_column, "time_format": time_format, "window": window}
    identity = run_identity(source, settings, **choices, pointwise=pointwise, hidden=hidden, nan=nan)
    check_before_start(run.out, settings, identity)
    rec, report = _read_load(run, source, column, (time_column, found), time_format, nan, encoding)
    wins = _windows_to_train(run, rec, report, window)
    listed = None if ref is None else listed_windows(ref, wins)
    per = wins.per_window
    raw = wins.values.reshape(-1, 1) if pointwise else wins.values  # the notebook's model sees one sample at a time
    # MinMax scaling to [0, 1] (fitted on every value), the MLP's sigmoid output
    default_scorer = "reconstruction" if pointwise else DEFAULT_SCORER
    detector = make_detector(
        settings, run.device, scorer=default_scorer, model="mlp", width=raw.shape[1], hidden=hidden, scaling="minmax"
    )
    what = f"{raw.shape[0]:,} {'samples' if pointwise else 'windows'} of {per} steps"
    learned = learn(run, detector, raw, settings, {"window_s": window_s, "identity": identity}, epoch_progress, what)
    with run.stage("score"):
        scores = group_scores(learned.scores, per, settings.percentile) if pointwise else learned.scores
        rows = detector.scaler_.transform(raw.reshape(-1)).reshape(raw.shape).float()
        raw_recon = _reconstructed(detector, learned.models[0], rows, wins.values.shape)
    with run.stage("transfer"):
        scored_rows, days, recon = scores.to_host(), wins.values.cpu().numpy(), raw_recon.detach().cpu().numpy()
    flagged = _flagged_order(scored_rows)
    dep, answers = _window_answers(wins, scored_rows, days, flagged, listed)
    with run.stage("write"):
        geometry = {"input": "load-windows", "window": window, "steps_per_window": per, "pointwise": pointwise}
        made = Made(
            "series", run.out, scored_rows, days=days, recon=recon, histories=learned.histories,
            threshold=scores.threshold, warning=learned.unsettled, leading=_leading(wins, dep), wins=wins,
            unit_name=rec.channels[0], flagged=flagged, pointwise=pointwise, detector=learned.detector,
            geometry=geometry,
        )  # fmt: skip
        files = write_artifacts(made)
    summary = {
        **input_summary(source, rec, run.device, channel_key="column"),
        "time_column": time_column if time_column is not None else "the DataFrame's DatetimeIndex",
        "window": window,
        "steps_per_window": per,
        "pointwise": pointwise,
        "settings": {**settings.to_dict(), "hidden": hidden},
        "time": report.to_dict(),
        "windows": _windows_summary(wins),
        **_series_scores_summary(detector, scores.threshold, settings.percentile, pointwise, per),
        **answers,
    }
    page = _flagged_windows(wins, scored_rows, days, flagged, rec.channels[0], dep)
    return finish(run, summary, learned, files, "series", page)


def _windows_to_train(run: Run, rec: Recording, report: TimeReport, window: str) -> Windows:
    """The series' complete windows of ``window`` (a duration); refuses too few to train on."""
    assert rec.timestamps is not None  # (a load series is read with its times: _read_load)
    with run.stage("window"):
        wins = make_windows(rec.samples, rec.timestamps, window_s=parse_duration(window), step_s=report.step_s)
    if wins.values.shape[0] < MIN_WINDOWS_TO_TRAIN:
        raise DevicepipeError(
            f"only {wins.values.shape[0]} complete windows of {window}; need at least {MIN_WINDOWS_TO_TRAIN}."
        )
    return wins


def _check_pointwise_scorer(settings: LearnSettings, pointwise: bool) -> None:
    """One sample's distance to its nearest samples says nothing of the window it is in: a
    per-sample model scores by its reconstruction error only."""
    if pointwise and settings.scorer not in (None, "reconstruction"):
        raise DevicepipeError(
            f"{{param}} {settings.scorer} cannot score single samples",
            fix="a {pointwise=True} model takes {scorer='reconstruction'} (the default).",
            param="scorer",
            value=settings.scorer,
        )


def _reconstructed(
    detector: BeatAnomalyDetector, model: torch.nn.Module, rows: torch.Tensor, shape: torch.Size
) -> torch.Tensor:
    """The model's reconstruction of scaled ``rows``, back in the series' units, shape ``shape``."""
    recon = reconstruct(model, rows).reshape(shape)
    return detector.scaler_.inverse_transform(recon.reshape(-1)).reshape(recon.shape)


def _flagged_order(rows: ScoredRows) -> np.ndarray:
    """The flagged windows' positions, highest score first."""
    return np.array([i for i in np.argsort(rows.scores)[::-1] if rows.flags[i]], dtype=np.int64)


def _series_scores_summary(
    detector: BeatAnomalyDetector, threshold: float, percentile: float, pointwise: bool, per: int
) -> dict[str, Any]:
    """``summary.json``'s threshold, what it means, and the scorer of a series run."""
    return {
        "threshold": threshold,
        "threshold_means": (
            (
                f"the {percentile:g}th percentile of the training windows' scores"
                if pointwise
                else detector.threshold_rule
            )
            + "; "
            + detector.score_meaning(
                f"a {'sample' if pointwise else 'window'} scaled to [0, 1] by the series' minimum and maximum",
                "fractions of that range",
            )
            + (f"; a window's score is the mean of its {per} samples'" if pointwise else "")
        ),
        "scorer": detector.scorer_summary(
            "pointwise: one sample's distance to other samples says nothing of its window" if pointwise else None
        ),
    }


def _windows_summary(wins: Windows) -> dict[str, Any]:
    """``summary.json``'s account of a load series' windows: used, gaps filled, dropped."""
    return {
        "used": int(wins.values.shape[0]),
        "filled_slots": int(wins.filled.sum()),
        "windows_with_filled_slots": int((wins.filled > 0).sum()),
        "dropped": [str(d)[:19] for d in wins.dropped],
    }


def _leading(wins: Windows, dep: Departures) -> dict[str, np.ndarray]:
    """The first columns of a series run's tables: each window's start, slots filled, direction."""
    return {"start": wins.starts, "filled_slots": wins.filled, "direction": dep.direction}


def _window_answers(
    wins: Windows,
    rows: ScoredRows,
    days: np.ndarray,
    flagged: np.ndarray,
    listed: Listed | None,
) -> tuple[Departures, dict[str, Any]]:
    """Each window's departure from like windows (:func:`~devicepipe.signal.windows.departures`), and
    what ``summary.json`` says of the windows (``days``, ``(n, steps)`` on the host): the flagged
    ones (``flagged``: positions, highest score first), low or high, with their tail probability
    where ``rows`` have one (a scored series); those holding one value throughout; and, with a
    reference (``listed``), ``window_reference``."""
    dep = departures(days, wins.starts, wins.per_window * wins.step_s)
    answers: dict[str, Any] = {
        "flagged": flagged_entries(wins, rows.scores, flagged, dep, rows.tail),
        "flat_windows": [str(wins.starts[i])[:19] for i in np.flatnonzero(flat_windows(days))],
    }
    if listed is not None:
        answers["window_reference"] = reference_summary(listed, wins, rows.scores, rows.flags, dep)
    return dep, answers


def _flagged_windows(
    wins: Windows, rows: ScoredRows, days: np.ndarray, flagged: np.ndarray, unit: str, dep: Departures
) -> FlaggedRows:
    """The report's list of flagged windows (``flagged``: indices, highest score first), each
    with its departure from like windows in words."""
    top = flagged[:MAX_FLAGGED_ROWS]
    return FlaggedRows(
        names=[str(wins.starts[i])[:10] for i in top],
        scores=rows.scores[top],
        rows=days[top],
        typical=dep.usual[top],
        typical_words="like windows (grey)",
        reasons=[departure_words(wins, dep, int(i)) for i in top],
        unit=unit,
        total=int(flagged.size),
        one="window",
        many="windows",
    )


@holds_output
def run_score_series(
    source: Any,
    out: str | Path,
    *,
    model: str | Path | BeatAnomalyDetector,
    column: str | int | None = None,
    time_column: str | int | None = None,
    time_format: str | None = None,
    reference: str | Path | None = None,
    device: str | torch.device = "auto",
    nan: NanPolicy = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    count_transfers: bool = True,
) -> LearnResult:
    """Score every window of a load series with a model trained earlier by :func:`run_series`,
    against the model's own threshold: the days (or other windows) of a new period judged by
    a model of what was normal before.

    The series is read as :func:`run_series` reads it (``source``, ``column``, ``time_column``:
    the same choices) and cut into windows of the model's length; its time step must be the
    model's (24 steps to a day for a model of hourly days). The windows are scaled by the
    model's own minimum and maximum (those of its training series), so a period of higher
    load than any it saw scores high. Each window gets its score, flag (score above the
    model's threshold) and tail probability (the share of the model's training windows
    scoring at least as high). A per-sample model (``series --pointwise``) is refused. Flagged
    windows are said low or high, and ``reference`` scores them, as :func:`run_series` does.

    Writes to ``out``: ``scores.parquet`` (window start, filled slots, codes, score, flag,
    spread, tail probability), ``scores.png``, ``latent.png``, ``extremes.png``, ``days.png``,
    ``report.html``, and ``summary.json`` last.
    """
    dev = resolve_device(device)
    detector = _window_model(model, dev)
    time_column, found = _load_times(source, time_column, "the model scores windows of a load series")
    ref = reference_days(reference)
    run = start(out, dev, count_transfers, progress)
    rec, report = _read_load(run, source, column, (time_column, found), time_format, nan, encoding)
    wins = _model_windows(run, rec, report, detector.geometry_)
    listed = None if ref is None else listed_windows(ref, wins)
    with run.stage("score"):
        scores = detector.score_details(wins.values)
        tail = detector.tail_of(scores.scores)
        rows = detector.scaler_.transform(wins.values.reshape(-1)).reshape(wins.values.shape).float()
        raw_recon = _reconstructed(detector, detector.models_[0], rows, rows.shape)
    with run.stage("transfer"):
        trained = detector.train_scores_.detach().cpu().numpy()
        scored_rows = replace(scores.to_host(), tail=tail.detach().cpu().numpy(), train_scores=trained)
        days, recon = wins.values.cpu().numpy(), raw_recon.detach().cpu().numpy()
    flagged = _flagged_order(scored_rows)
    dep, answers = _window_answers(wins, scored_rows, days, flagged, listed)
    with run.stage("write"):
        made = Made(
            "score-series", run.out, scored_rows, days=days, recon=recon, threshold=detector.threshold_, wins=wins,
            unit_name=rec.channels[0], leading=_leading(wins, dep), flagged=flagged,
        )  # fmt: skip
        files = write_artifacts(made)
    summary = {
        **input_summary(source, rec, run.device, channel_key="column"),
        "time_column": time_column if time_column is not None else "the DataFrame's DatetimeIndex",
        "model": model_summary(detector, "training_windows"),
        "window": str(detector.geometry_["window"]),
        "steps_per_window": wins.per_window,
        "time": report.to_dict(),
        "windows": _windows_summary(wins),
        **_score_series_scores(detector, scored_rows),
        **answers,
        "seconds": run.timer.seconds,
        "transfers": run.timer.transfers(),
        "threads": detector.threads_.to_dict(),
        "warnings": scale_fit_warnings(detector, days, rec.channels[0])
        + flag_share_warnings(detector, scored_rows.flags, "windows", "another place, period or unit")
        + failed_model_warnings(detector),
    }
    page = _flagged_windows(wins, scored_rows, days, flagged, rec.channels[0], dep)
    typed = RunSummary.from_dict(summary)
    files[REPORT_NAME] = write_report(run.out, "score-series", typed, files, flagged=page)
    typed = write_summary(run.out, typed, files, replaces=run.earlier)
    files["summary.json"] = run.out / "summary.json"
    return LearnResult(run.out, typed, files)


def _window_model(model: str | Path | BeatAnomalyDetector, device: torch.device) -> BeatAnomalyDetector:
    """A fitted model of load-series windows on ``device``; a per-sample model is refused."""
    detector = fitted_model(model, device, "load-windows")
    if detector.geometry_.get("pointwise"):
        raise DevicepipeError(
            "the model is a per-sample autoencoder (series --pointwise): it scores samples, not windows; "
            "train a model of whole windows (series without --pointwise) to score a new period."
        )
    return detector


def _model_windows(run: Run, rec: Recording, report: TimeReport, geometry: dict[str, Any]) -> Windows:
    """The series' windows as the model takes them: its window, in its number of steps."""
    window = str(geometry["window"])
    window_s = parse_duration(window)
    assert rec.timestamps is not None  # (a load series is read with its times: _read_load)
    with run.stage("window"):
        wins = make_windows(rec.samples, rec.timestamps, window_s=window_s, step_s=report.step_s)
    per = int(geometry["steps_per_window"])
    if wins.per_window != per:
        raise DevicepipeError(
            f"the model takes windows of {window} in {per} steps of {format_duration(window_s / per)}; "
            f"{rec.source} has a step of {format_duration(report.step_s)} ({wins.per_window} to a window): "
            "give the series at the model's step."
        )
    if wins.values.shape[0] == 0:
        raise DevicepipeError(f"{rec.source} holds no complete window of {window} to score.")
    return wins


def _score_series_scores(detector: BeatAnomalyDetector, rows: ScoredRows) -> dict[str, Any]:
    """``summary.json``'s threshold, what it means, the scorer and the flag rate."""
    return {
        "threshold": detector.threshold_,
        "threshold_means": (
            f"the model's own threshold, {detector.threshold_rule}; "
            + detector.score_meaning(
                "a window scaled to [0, 1] by the minimum and maximum of the model's training series",
                "fractions of that range",
            )
        ),
        "scorer": detector.scorer_summary(),
        "flag_rate": float(rows.flags.mean()),
    }
