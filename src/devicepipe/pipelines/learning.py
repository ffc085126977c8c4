"""What the learning pipelines share: the detector and its training, the model a run is given,
what a resumed run must match, and finishing a run (summary, report)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from devicepipe.anomaly import BeatAnomalyDetector, load_model
from devicepipe.artifacts.summaries import RunSummary
from devicepipe.artifacts.write import (
    write_summary,
)
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.threads import ThreadChoice
from devicepipe.ecg import (
    ALIGNED_WORDS,
    BASELINE_WORDS,
    Beats,
    align_rows,
    baseline_rows,
)
from devicepipe.io.read import input_fingerprint
from devicepipe.learning.learn import (
    DEFAULT_SCORER,
    SCORES_AT_STAKE,
    LearnSettings,
    convergence_warning,
    kept_epoch,
    learning_failed,
)
from devicepipe.learning.score import Scores
from devicepipe.pipelines.context import EpochProgress, Run
from devicepipe.pipelines.results import LearnResult
from devicepipe.report import REPORT_NAME, FlaggedRows, write_report
from devicepipe.scorers import SCORER_KINDS
from devicepipe.signal.resample import resample_rows
from devicepipe.signal.scale import StandardScaler


@dataclass(frozen=True)
class Learned:
    """The fitted detector, its histories, every row's scores, and the threads it used."""

    detector: BeatAnomalyDetector
    scores: Scores
    epoch_limit: int
    #: Set when a model was still learning when training ended, or did not learn: for the figures
    #: of the model (its latent map, generated beats, reconstructions) in every case.
    unsettled: str | None
    #: Set when training failed (the loss became NaN, grew by orders of magnitude or froze; the
    #: latent space collapsed): said everywhere, whether or not the scores use the model.
    failed: str | None = None

    @property
    def warning(self) -> str | None:
        """What the terminal and the summary's warnings say of the model: a failed model always; one
        still learning only when the scorer uses it (the default ``local`` scores the rows themselves)."""
        if self.failed is not None:
            return self.failed
        return self.unsettled if SCORER_KINDS[self.detector.scorer].uses_model else None

    @property
    def models(self) -> list[torch.nn.Module]:
        return self.detector.models_

    @property
    def histories(self) -> list[dict[str, Any]]:
        return self.detector.histories_

    @property
    def threads(self) -> ThreadChoice:
        return self.detector.threads_


def make_detector(
    settings: LearnSettings, device: torch.device, *, scorer: str = DEFAULT_SCORER, **model: Any
) -> BeatAnomalyDetector:
    """The estimator a learning pipeline trains, from its settings (``scorer``: the pipeline's
    default when they name none); ``model`` its model's choices."""
    return BeatAnomalyDetector.from_settings(settings, device=device, scorer=scorer, **model)


def learn(
    run: Run,
    detector: BeatAnomalyDetector,
    rows: torch.Tensor,
    settings: LearnSettings,
    extra_state: dict[str, Any],
    epoch_progress: EpochProgress | None,
    what: str,
    *,
    stream: bool = False,
) -> Learned:
    """The shared middle of the learning pipelines: fit ``detector`` on ``rows`` in ``run.out``
    (its checkpoint there), score every row."""
    run.out.mkdir(parents=True, exist_ok=True)
    (run.out / "summary.json").unlink(missing_ok=True)  # the directory is incomplete until the end

    learns_from = len(detector.model_rows_of(rows.shape[0]))

    def started(threads: ThreadChoice) -> None:
        on = what if learns_from == rows.shape[0] else f"{learns_from:,} evenly spaced of {what}"
        run.note(f"training on {on} ({threads.threads} thread{'s' if threads.threads > 1 else ''})")
        if not SCORER_KINDS[detector.scorer].uses_model:
            run.note(f"the model draws the maps; the scores and flags do not use it ({MODEL_USED_BY})")

    with run.stage("train"):
        detector.fit(
            rows,
            checkpoint_dir=run.out,
            resume=settings.resume,
            callback=epoch_progress,
            tensorboard=settings.tensorboard,
            extra_state=extra_state,
            on_start=started,
            stream=stream,
        )
    at_stake = SCORES_AT_STAKE if SCORER_KINDS[detector.scorer].uses_model else FIGURES_AT_STAKE
    failed = learning_failed(detector.histories_, detector.details_.embeddings, at_stake)
    unsettled = failed or convergence_warning(detector.histories_, at_stake)
    return Learned(detector, detector.details_, settings.epoch_limit, unsettled, failed)


#: Where a model trained alongside the default scores is used instead (for the note a run prints).
MODEL_USED_BY = "--scorer reconstruction or combined scores with it"

#: What an unsettled model makes unreliable where the scores do not use it.
FIGURES_AT_STAKE = (
    "its latent map and what it generates and reconstructs (the scores and flags do not use the model, so they stand)"
)


#: What a beat model's geometry says about scaling: each recording's beats by their own mean and deviation.
RECORDING_SCALING = "each recording's beats standardised by their own mean and standard deviation"


def beat_geometry(beats: Beats, method: str, width: int) -> dict[str, Any]:
    """What rows a beat model takes, for its model file: how beats are found, cut, resampled and scaled.

    Beats are cut in seconds and resampled to ``width`` samples, so a model takes recordings
    of any sampling rate; the rate it was trained at is kept for the record."""
    return {
        "input": "ecg-beats",
        "method": method,
        "mode": beats.mode,
        "window_s": beats.window_s,
        "width": width,
        "scaling": RECORDING_SCALING,
        "baseline": BASELINE_WORDS,
        **({"aligned": ALIGNED_WORDS} if beats.mode == "centered" else {}),
        "trained_at_hz": beats.sampling_rate,
    }


def run_identity(source: Any, settings: LearnSettings, **choices: Any) -> dict[str, Any]:
    """What a resumed run must share with the checkpointed one: the input (by content), the
    training settings that shape the model and its data, and the pipeline's ``choices``."""
    fingerprint = input_fingerprint(source)
    # (not the scorer: it reads the model once trained, so a resumed run may score with another)
    kept = {k: getattr(settings, k) for k in ("seed", "batch_size", "lr", "latent", "ensemble", "weight_decay")}
    return {"input": None if fingerprint is None else fingerprint[:16], **kept, **choices}


def finish(
    run: Run,
    summary: dict[str, Any],
    learned: Learned,
    files: dict[str, Path],
    kind: str,
    flagged: FlaggedRows | None,
) -> LearnResult:
    """Complete a run's summary (final losses, seconds, transfers, files), write the run's
    ``report.html`` (a ``kind`` page), and ``summary.json`` last."""
    histories = learned.histories
    summary.update(
        epochs={
            "limit": learned.epoch_limit,
            "run": [len(h["train"]) for h in histories],
            "kept": [kept_epoch(h) for h in histories],  # whose weights the models have
            "stopped_early": [h["stopped_early"] for h in histories],
        },
        final_loss={"train": [h["train"][-1] for h in histories], "val": [h["val"][-1] for h in histories]},
        converged=learned.unsettled is None,
        model_failed=learned.failed,
        warnings=([] if learned.warning is None else [learned.warning]) + summary.get("warnings", []),
        seconds=run.timer.seconds,
        transfers=run.timer.transfers(),
        threads=learned.threads.to_dict(),
    )
    typed = RunSummary.from_dict(summary)
    files[REPORT_NAME] = write_report(run.out, kind, typed, files, flagged=flagged)
    typed = write_summary(run.out, typed, files, replaces=run.earlier)
    files["summary.json"] = run.out / "summary.json"
    return LearnResult(run.out, typed, files)


#: What a saved model's ``geometry_["input"]`` says it takes, and the command that trains one.
MODEL_INPUTS = {
    "ecg-beats": "ECG beats, from 'devicepipe ecg' or 'devicepipe train'",
    "load-windows": "windows of a load series, from 'devicepipe series'",
}


def model_input(model: Any, device: str | torch.device = "cpu") -> str | None:
    """What a saved model takes (a key of :data:`MODEL_INPUTS`, or None for rows fitted through
    the Python API); ``model`` is a run directory, a ``model.pt`` or a fitted detector."""
    detector = model if isinstance(model, BeatAnomalyDetector) else load_model(model, device)
    return (getattr(detector, "geometry_", {}) or {}).get("input")


def fitted_model(model: Any, device: torch.device, takes: str) -> BeatAnomalyDetector:
    """A fitted model of ``takes`` (a key of :data:`MODEL_INPUTS`) from a path (a run directory
    or ``model.pt``) or a detector, on ``device``."""
    detector = model if isinstance(model, BeatAnomalyDetector) else load_model(model, device)
    if isinstance(model, BeatAnomalyDetector):
        detector.to(device)
    got = model_input(detector)
    if got != takes:
        what = MODEL_INPUTS.get(got or "", "rows of no known recording (fitted through the Python API)")
        raise DevicepipeError(f"the model takes {what}; this scores {MODEL_INPUTS[takes]}.")
    return detector


def model_rows(
    beats: Beats, signal: torch.Tensor, width: int, *, level: bool = True, align: bool = True
) -> torch.Tensor:
    """The rows of ``beats`` as a beat model takes them, before standardising: ``(n_kept, width)``.

    ``level``: less the baseline of ``signal`` (the ``(time,)`` lead they were cut from) under
    each (:func:`devicepipe.ecg.baseline_rows`), so that a beat at the top of a slow swing of the
    zero level has the shape of one at its foot. Then resampled to ``width`` columns. ``align``
    (windows centred on the R peak only): each moved by whole columns to line its QRS complex up
    with the typical beat's (:func:`devicepipe.ecg.align_rows`), so that a sample of detection
    jitter does not make a beat unusual. A model's geometry says which it was trained with.
    """
    matrix = beats.matrix - baseline_rows(signal, beats) if level else beats.matrix
    rows = resample_rows(matrix, width)
    if align and beats.mode == "centered" and matrix.shape[1]:
        r_column = (beats.before + 0.5) * width / matrix.shape[1] - 0.5  # where the R peak lands
        rows, _ = align_rows(rows, r_column, width / beats.window_s)
    return rows


def beat_rows(matrix: torch.Tensor, width: int) -> torch.Tensor:
    """A recording's beat matrix ``(n, w)`` (:func:`model_rows`' for a model whose geometry says
    so) as a beat model takes it: resampled to ``width`` columns and standardised by the beats'
    own mean and standard deviation (over every value)."""
    rows = resample_rows(matrix, width)
    return StandardScaler().fit(rows.reshape(-1)).transform(rows.reshape(-1)).reshape(rows.shape)


def model_summary(detector: BeatAnomalyDetector, rows_key: str) -> dict[str, Any]:
    """``summary.json``'s account of the model a ``score`` run used (``rows_key`` names its
    training rows: beats or windows); its path is None for one fitted in this process."""
    return {
        "path": getattr(detector, "path_", None),
        "trained_on_device": getattr(detector, "trained_on_", None),
        "versions": getattr(detector, "versions_", None),
        "geometry": detector.geometry_,
        "members": len(detector.models_),
        rows_key: detector.fit_rows_["rows"],
    }
