"""``run_ecg``: the beats of an ECG, a VAE trained on them, every beat scored and flagged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.anomaly import BeatAnomalyDetector
from devicepipe.artifacts import Made, write_artifacts
from devicepipe.artifacts.write import (
    heart_rate_summary,
    input_summary,
    write_beat_files,
)
from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import (
    BEAT_CLASSES,
    BeatQuality,
    Beats,
    beat_quality,
)
from devicepipe.ecg.segment import SegmentMode
from devicepipe.io import (
    Recording,
)
from devicepipe.io.timeline import NanPolicy
from devicepipe.io.write import holds_output
from devicepipe.learning.learn import (
    LearnSettings,
    check_before_start,
)
from devicepipe.learning.score import class_grid, latent_grid, reconstruct
from devicepipe.models import LightVAEConfig, as_model
from devicepipe.pipelines.checks import record_name, time_warnings
from devicepipe.pipelines.classes import Labelled, label_beats
from devicepipe.pipelines.context import (
    BEAT_WIDTH,
    ECG_MODE,
    MIN_BEATS_TO_TRAIN,
    PEAK_METHOD,
    EpochProgress,
    Progress,
    Run,
    start,
)
from devicepipe.pipelines.learning import Learned, beat_geometry, finish, learn, make_detector, model_rows, run_identity
from devicepipe.pipelines.quality import check_min_quality, quality_summary, quality_table_columns
from devicepipe.pipelines.reading import read_and_cut
from devicepipe.pipelines.results import LearnResult
from devicepipe.pipelines.scored import (
    Scored,
    beat_counts,
    beat_places,
    flag_reason,
    flagged_beats,
    label_with_reference,
    labelled_reference,
    reference_summary,
    score_views,
    views_on_host,
)
from devicepipe.report import FlaggedRows
from devicepipe.signal.scale import StandardScaler


@holds_output
def run_ecg(
    source: Any,
    out: str | Path,
    *,
    settings: LearnSettings | None = None,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    device: str | torch.device = "auto",
    mode: SegmentMode = ECG_MODE,
    width: int = BEAT_WIDTH,
    method: str = PEAK_METHOD,
    reference: str | Path | None = None,
    nan: NanPolicy = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    epoch_progress: EpochProgress | None = None,
    count_transfers: bool = True,
    min_quality: float | None = None,
) -> LearnResult:
    """Read an ECG, find and cut its beats, train a VAE (or a vmap ensemble), score, write, plot.

    ``min_quality`` (a correlation in [-1, 1]) leaves beats in stretches of poor signal (their
    10-s stretch's median correlation with the recording's typical beat under it; see
    :meth:`~devicepipe.ecg.BeatQuality.in_good_signal`) out of training and out of the flags: they are still
    scored and written, never flagged, and counted in ``summary.json``'s ``quality``.

    ``reference`` (a WFDB annotation file or a table of R peaks with labels, such as the
    simulator's truth file) labels each beat by its nearest reference beat within 150 ms: the
    labels go into ``embeddings.parquet`` (column ``reference``) and the figures, and
    ``summary.json`` counts the beats and the flagged beats of each label.

    Beats are windows centred on each R peak by default (``mode="centered"``, 0.25 s before to
    0.45 s after): the notebook's peak-to-peak segmentation (``mode="seed"``) drops every
    premature beat followed by a compensatory pause, the very beats an anomaly score should
    find. Rows are resampled to ``width`` samples (a power of two) whatever the sampling rate.

    Writes to ``out``: ``summary.json`` (last, so a directory without it is incomplete),
    ``beats.parquet``, ``embeddings.parquet`` (peak, time, latent means, score, flag, spread),
    ``checkpoint.pt`` (or ``ensemble.pt``), ``history.csv`` and figures (``training.png``,
    ``latent.png``, ``generated.png`` and ``.pdf``, ``extremes.png``, ``excerpt.png``).
    """
    settings = settings or LearnSettings()
    vae = LightVAEConfig(width=width, latent=settings.latent)  # checked before anything is read or written
    ref = labelled_reference(reference, "ecg")
    check_min_quality(min_quality)
    run = start(out, device, count_transfers, progress)
    choices = {"channel": channel, "sampling_rate": sampling_rate, "method": method, "mode": mode, "width": width}
    identity = run_identity(source, settings, **choices, nan=nan)
    identity |= {"min_quality": min_quality}  # (the rows trained on: a resume with it dropped is another run)
    check_before_start(run.out, settings, identity)
    every, rec, peaks, beats, leads = read_and_cut(run, source, channel, sampling_rate, method, mode, nan, encoding)
    labelled = label_beats(run, every, peaks)
    data, quality, usable, scaler = _training_rows(run, rec, beats, width, min_quality)
    detector = make_detector(settings, run.device, model="vae", width=vae.width, scaling="none")
    extra = {"scaler": scaler.state_dict(), "identity": identity}
    learned = _learn_usable(run, detector, data, usable, settings, extra, epoch_progress)
    with run.stage("score"):
        on_device = _model_views(learned, data, labelled.classes.labels[beats.kept.cpu().numpy()])
    with run.stage("transfer"):
        rows, views, places = learned.scores.to_host(), views_on_host(on_device), beat_places(peaks, beats)
        signal = rec.samples.cpu().numpy()
    with run.stage("hrv"):
        heart_rate = heart_rate_summary(peaks, rec.fs, labelled.classes.labels)
    if ref is not None:
        places = label_with_reference(places, ref, rec)
    scored = Scored(rows, views, places)
    with run.stage("write"):
        files = _write_ecg(run, rec, signal, scored, learned, beats, quality, beat_geometry(beats, method, width),
                           labelled)  # fmt: skip
    summary = {
        **input_summary(source, rec, run.device),
        **leads,
        "holter": labelled.summary(),
        "settings": {**settings.to_dict(), "mode": mode, "width": width, "method": method},
        **_ecg_scores_summary(scored, heart_rate, learned, rec.fs),
        "quality": quality_summary(quality, beats.peaks, rec.n_samples, rec.fs, min_quality),
        "warnings": time_warnings(rec),
    }
    if usable is not None:
        summary["quality"]["left_out_of_training_and_flags"] = int((~usable).sum())
    if ref is not None:
        summary |= reference_summary(ref, rec, scored)
    return finish(run, summary, learned, files, "ecg", flagged_beat_rows(scored, rec.fs))


def _write_ecg(
    run: Run,
    rec: Recording,
    signal: np.ndarray,
    scored: Scored,
    learned: Learned,
    beats: Beats,
    quality: BeatQuality,
    geometry: dict[str, Any],
    labelled: Labelled,
) -> dict[str, Path]:
    """Every file of an ECG run but its report and summary: the beat files (with each beat's
    class) and scores, the model (with the ``geometry`` of its rows), the figures."""
    files, leading = scored_beat_files(run, rec, scored, quality, labelled)
    made = Made(
        "ecg", run.out, scored.rows, scored.views, scored.places, rec=rec, signal=signal, histories=learned.histories,
        threshold=learned.scores.threshold, warning=learned.unsettled, leading=leading,
        beat_rate=geometry["width"] / beats.window_s,  # Hz of the resampled beat rows
        quality=(quality, beats.peaks, rec.n_samples), detector=learned.detector, geometry=geometry,
        reference=scored.places.reference_peaks,
        classes=labelled.classes.labels, events=labelled.holter.events,
    )  # fmt: skip
    return files | write_artifacts(made)


def _learn_usable(
    run: Run,
    detector: BeatAnomalyDetector,
    data: torch.Tensor,
    usable: torch.Tensor | None,
    settings: LearnSettings,
    extra: dict[str, Any],
    epoch_progress: EpochProgress | None,
) -> Learned:
    """Train on the usable beats (all where ``usable`` is None), then score every beat against
    that model; beats of poor signal are scored but never flagged."""
    training = data if usable is None else data[usable]
    learned = learn(run, detector, training, settings, extra, epoch_progress, f"{training.shape[0]:,} beats")
    if usable is not None:
        every = learned.detector.score_details(data)
        learned = replace(learned, scores=replace(every, flags=every.flags & usable))
    return learned


def _training_rows(
    run: Run, rec: Recording, beats: Beats, width: int, min_quality: float | None
) -> tuple[torch.Tensor, BeatQuality, torch.Tensor | None, StandardScaler]:
    """The beats as the VAE's rows: resampled to ``width`` and standardised by the recording's
    (usable) beats, shape ``(n_beats, width)``; their quality; which are usable (None: all, no
    ``min_quality``); the scaler. Refuses too few beats to train."""
    with run.stage("segment"):
        matrix = model_rows(beats, rec.samples, width)
        quality = beat_quality(beats)
    usable = None if min_quality is None else quality.in_good_signal(min_quality)
    if usable is not None and matrix.shape[0] and int(usable.sum()) < MIN_BEATS_TO_TRAIN:
        raise DevicepipeError(
            f"only {int(usable.sum())} of {matrix.shape[0]} beats reach {{param}} {min_quality}; "
            f"at least {MIN_BEATS_TO_TRAIN} are needed to train",
            fix="lower {min_quality}.",
            param="min_quality",
            value=min_quality,
        )
    if matrix.shape[0] < MIN_BEATS_TO_TRAIN:
        problem = (
            f"only {matrix.shape[0]} beats were cut from {rec.source}; "
            f"at least {MIN_BEATS_TO_TRAIN} are needed to train"
        )
        raise DevicepipeError(problem, fix="is it an ECG? is {sampling_rate} right?", param="sampling_rate")
    with run.stage("scale"):
        scaler = StandardScaler().fit((matrix if usable is None else matrix[usable]).reshape(-1))
        data = scaler.transform(matrix.reshape(-1)).reshape(matrix.shape)
    return data, quality, usable, scaler


def _model_views(learned: Learned, data: torch.Tensor, row_classes: np.ndarray) -> dict[str, torch.Tensor]:
    """What the figures and the report show of a trained VAE and its scores of ``data``: the
    latent grid and the beats it generates, the typical beat, the extreme rows and their
    reconstructions, the flagged rows and the typical one (:func:`score_views`).

    ``row_classes`` ``(rows,)``: each row's beat class. Where another class than N has beats
    enough, the grid runs from the N beats' mean code to that class's (``grid_towards``: its
    index in ``BEAT_CLASSES``), and the typical beat is the N beats' mean code's; else it spans
    the directions the codes spread most along (``grid_towards`` -1) around their mean.
    """
    scores, first = learned.scores, learned.models[0]
    views = score_views(scores, data)
    emb = scores.embeddings
    masks = {c: torch.from_numpy(row_classes == c).to(emb.device) for c in ("N", "S", "V", "F")}
    normal = masks.pop("N")
    towards = class_grid(emb, normal, masks, 5)
    if towards is None:
        grid, code, centre = latent_grid(emb, 5), -1, emb.mean(0, keepdim=True)
    else:
        grid, code, centre = towards[0], list(BEAT_CLASSES).index(towards[1]), emb[normal].mean(0, keepdim=True)
    return views | {
        "grid": grid,
        "grid_towards": torch.tensor(code),
        "generated": as_model(first).decode(grid).detach(),
        "centre": as_model(first).decode(centre).detach()[0],
        "extreme_recon": reconstruct(first, data[views["extreme_idx"]]),
        "extreme_rows": data[views["extreme_idx"]],
    }


def _ecg_scores_summary(
    scored: Scored, heart_rate: dict[str, Any] | None, learned: Learned, fs: float
) -> dict[str, Any]:
    """``summary.json``'s heart rate, counts, threshold (and what it means), scorer and flagged beats."""
    return {
        "heart_rate": heart_rate,
        "counts": beat_counts(scored.places, scored.rows),
        "threshold": learned.scores.threshold,
        "threshold_means": (
            f"{learned.detector.threshold_rule}; "
            + learned.detector.score_meaning(
                "a beat standardised by the recording's mean and standard deviation", "standard deviations"
            )
        ),
        "scorer": learned.detector.scorer_summary(),
        "flagged": flagged_beats(scored.places, scored.rows, fs),
    }


def scored_beat_files(
    run: Run, rec: Recording, scored: Scored, quality: BeatQuality, classes: Labelled
) -> tuple[dict[str, Path], dict[str, np.ndarray]]:
    """The beat files of a scored run (every R peak with its quality, class, score and flag: NaN
    and False where the beat was not kept), and the leading columns of its per-beat table (peak,
    time, and the reference label where the beats were labelled by one)."""
    places, rows = scored.places, scored.rows
    fs, n = rec.fs, places.all_peaks.size
    per_peak, flagged_peak = np.full(n, np.nan), np.zeros(n, bool)
    per_peak[places.kept], flagged_peak[places.kept] = rows.scores, rows.flags
    files = write_beat_files(
        run.out, record_name(rec), places.all_peaks, places.kept, fs, scores=per_peak, flags=flagged_peak,
        quality=quality_table_columns(quality, places.kept), classes=classes.columns, rhythms=classes.holter.rhythms,
    )  # fmt: skip
    leading = {"peak": places.peaks, "time_s": places.peaks / fs}
    if places.truth is not None:
        leading["reference"] = places.truth
    return files, leading


def flagged_beat_rows(scored: Scored, fs: float) -> FlaggedRows:
    """The report's table of the highest-scoring flagged beats, each beside the typical one."""
    rows, views, places = scored.rows, scored.views, scored.places
    top = views.top_flagged
    truth, neighbour_s = places.truth, places.neighbour_s
    return FlaggedRows(
        names=[f"{places.peaks[i] / fs:,.1f} s" for i in top],
        scores=rows.scores[top],
        rows=views.flagged_rows,
        typical=views.typical,
        labels=None if truth is None else [str(truth[i]) for i in top],
        reasons=None if neighbour_s is None else [flag_reason(float(neighbour_s[i])) for i in top],
        unit="standard deviations of the recording",
        total=int(rows.flags.sum()),
        one="beat",
        many="beats",
    )
