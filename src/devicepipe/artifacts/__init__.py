"""The output files of a run, declared once: :data:`ARTIFACTS`.

Each :class:`Artifact` names a file, says what it answers (its caption in ``report.html``)
and, for each kind of run that writes it, how it is made from what the run made
(:class:`Made`). A pipeline hands its :class:`Made` to :func:`write_artifacts` once, at the
end; a new output file is one more entry here. The beat tables, ``report.html`` and
``summary.json`` are written by :mod:`devicepipe.artifacts.write` (``summary.json``'s typed
records are :mod:`devicepipe.artifacts.summaries`) and ``report.html`` by :mod:`devicepipe.report`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devicepipe.artifacts import figures, tables
from devicepipe.artifacts.made import REPORT_SECTIONS, Artifact, BeatPlaces, Histories, Made, RowViews, ScoredRows
from devicepipe.artifacts.names import CHECKPOINT_NAME, ENSEMBLE_NAME, MODEL_NAME
from devicepipe.artifacts.tables import write_history
from devicepipe.plots import save_figure

LEARNING = ("ecg", "train", "series")

#: Every output file made here, in the order a page shows its figures.
ARTIFACTS: tuple[Artifact, ...] = (
    Artifact(
        "scores.png",
        "the share of beats at each score, against the model's training beats; the dashed line is the threshold, "
        "and a recording like the training beats lies over them",
        {
            "score": figures.scores(),
            "train": figures.scores(
                "Scores of the training beats (the threshold is taken from the training split)",
                names=("training split", "every beat, validation included"),
            ),
            "score-series": figures.scores(
                "Scores of this series' windows against the model's training windows",
                what="windows",
                names=("training", "this series"),
            ),
        },
        shown={"score": "scores", "train": "learned", "score-series": "scores"},
    ),
    Artifact(
        "days.png",
        "the flagged days with the highest scores against the typical day",
        {"series": figures.days, "score-series": figures.days},
        shown=dict.fromkeys(("series", "score-series"), "windows"),
    ),
    Artifact(
        "extremes.png",
        "the most and least anomalous rows with the model's reconstructions; a flagged row scores above the "
        "threshold and differs by at least the least effect (a row above it by a smaller difference says so), "
        "and the reconstruction shows what the model expected instead",
        {
            "ecg": figures.extreme_beats("their"),
            "score": figures.extreme_beats("the model's"),
            "series": figures.window_extremes,
            "score-series": figures.window_extremes,
        },
        shown={"ecg": "learned", "score": "scores", "series": "windows", "score-series": "windows"},
    ),
    Artifact(
        "latent.png",
        "every beat's or window's code: beats coloured by their class where they were classed, windows (and "
        "unclassed beats) by their score; flagged ones ringed, reference labels marked where given",
        {
            "ecg": figures.latent("Latent means of {n} beats"),
            "score": figures.latent("Latent means of {n} beats under the model"),
            "train": figures.latent("Latent means of {n} beats of {recordings:,} recordings"),
            "series": figures.latent("Window codes"),
            "score-series": figures.latent("Codes of {n} windows under the model"),
        },
        shown={"ecg": "learned", "score": "scores", "train": "learned", "series": "codes", "score-series": "scores"},
    ),
    Artifact(
        "generated.png",
        "beats the model generates across its latent space, against the typical beat in grey: from the "
        "normal beats' mean code to another class's where there is one, so you see the shapes it learned",
        {"ecg": figures.generated},
        also=("generated.pdf",),
        shown={"ecg": "generated"},
    ),
    Artifact(
        "training.png",
        "loss per epoch; the dot marks the epoch whose weights were kept",
        {
            "ecg": figures.training("VAE training on {n} beats"),
            "train": figures.training("VAE training on {n} beats of {recordings:,} recordings"),
            "series": figures.training("{kind} training on {n} windows"),
        },
        shown=dict.fromkeys(LEARNING, "training"),
    ),
    Artifact(
        "heart_rate.png",
        "heart rate from each RR interval, and the median of each minute",
        {"beats": figures.heart_rate, "ecg": figures.heart_rate, "score": figures.heart_rate},
        shown={"beats": "beats", "ecg": "heart", "score": "heart"},
    ),
    Artifact(
        "events.png",
        "eight seconds around the first event of each kind found (its time from the recording's start, h:mm:ss), "
        "every beat found lettered with its class: N normal, S supraventricular, V ventricular, F fusion, Q "
        "unclassifiable; with a reference, its beats never detected marked 'missed' (hollow)",
        {"beats": figures.event_strips, "ecg": figures.event_strips, "score": figures.event_strips},
        shown=dict.fromkeys(("beats", "ecg", "score"), "events"),
    ),
    Artifact(
        "excerpt.png",
        "ten seconds of the signal with the detected beats (and reference beats where given)",
        {"beats": figures.excerpt, "ecg": figures.excerpt, "score": figures.excerpt},
        shown={"beats": "beats", "ecg": "heart", "score": "heart"},
    ),
    Artifact(
        "intervals.png",
        "how long the intervals between R peaks are, in seconds and in samples",
        {"beats": figures.intervals},
        shown={"beats": "beats"},
    ),
    Artifact(
        "quality.png",
        "how much each beat looks like the recording's typical beat, and each 10-s stretch's median; shaded: "
        "stretches unusable for analysis (median under the dashed line, or no beat)",
        {"beats": figures.quality, "ecg": figures.quality},
        shown={"beats": "beats", "ecg": "heart"},
    ),
    Artifact(
        "speedup.png",
        "how many times faster each stage is on one side than on the other (above 1: the first named is slower); "
        "hatched bars compare different work, as the note under the chart says",
    ),
    Artifact("bandwidth.png", "copy bandwidth against the size of one copy: small copies pay a fixed cost"),
    Artifact("crossover.png", "time against input size on each device; from the crossover on, the GPU wins"),
    Artifact(
        "embeddings.parquet",
        "one row per row trained on: its latent code, score, flag and spread",
        dict.fromkeys(LEARNING, tables.embeddings),
    ),
    Artifact(
        "scores.parquet",
        "one row per row scored: its latent code, score, flag, spread and tail probability",
        {"score": tables.scores_table, "score-series": tables.scores_table},
    ),
    Artifact(
        "heart_rate.csv",
        "the heart rate of each minute: its beats and their median, lowest and highest rate (bpm)",
        dict.fromkeys(("beats", "ecg", "score"), tables.minute_table),
    ),
    Artifact("history.csv", "each epoch's training and validation loss", dict.fromkeys(LEARNING, tables.history)),
    Artifact(
        CHECKPOINT_NAME,
        "the last epoch's training state, for --resume",
        dict.fromkeys(LEARNING, tables.left_by_training(CHECKPOINT_NAME)),
    ),
    Artifact(
        ENSEMBLE_NAME,
        "the trained ensemble's members",
        dict.fromkeys(LEARNING, tables.left_by_training(ENSEMBLE_NAME)),
    ),
    Artifact(MODEL_NAME, "the model, for devicepipe score", dict.fromkeys(LEARNING, tables.model)),
    Artifact(
        "recordings.parquet",
        "one row per recording trained on: its beats, those of poor quality left out, its rate, flags and median score",
        {"train": tables.recordings},
    ),
)


def figures_shown(kind: str, section: str) -> list[str]:
    """The figures a ``kind`` of run shows in the report section ``section`` (one of
    :data:`REPORT_SECTIONS`), in the order of :data:`ARTIFACTS`."""
    return [a.name for a in ARTIFACTS if a.shown.get(kind) == section]


def caption(name: str) -> str:
    """What the output file ``name`` answers ("" for a file not declared here)."""
    return next((a.caption for a in ARTIFACTS if a.name == name), "")


def write_artifacts(made: Made, only: tuple[str, ...] | None = None) -> dict[str, Path]:
    """Write every artifact that ``made.kind`` makes (or ``only`` those named) into ``made.out``;
    the files written by name."""
    files: dict[str, Path] = {}
    for artifact in ARTIFACTS:
        make = artifact.makes.get(made.kind)
        if make is None or (only is not None and artifact.name not in only):
            continue
        result: Any = make(made)
        if result is None:
            continue
        if isinstance(result, Path):
            files[artifact.name] = result
            continue
        for name in artifact.also:
            files[name] = save_figure(result, made.out / name)
        files[artifact.name] = save_figure(result, made.out / artifact.name)
    return files


__all__ = [
    "ARTIFACTS",
    "REPORT_SECTIONS",
    "Artifact",
    "BeatPlaces",
    "Histories",
    "Made",
    "RowViews",
    "ScoredRows",
    "caption",
    "figures_shown",
    "write_artifacts",
    "write_history",
]
