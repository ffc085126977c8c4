"""Every pipeline by name: :data:`PIPELINES`.

A :class:`Pipeline` says what a run of it is: the report page it writes (a kind of
:data:`devicepipe.report.pages.PAGES`), how it runs a group of recordings when given a folder
(None: one recording at a time only), what the command line says of a finished run, and which
figures to open after ``report.html``. A dataset's index row is the same for every pipeline
(:func:`devicepipe.batch.index.index_row`, from the typed summary). A new pipeline is its module
plus one entry here; :func:`devicepipe.batch.run_dataset` finds those that take folders in
:data:`DATASET_PIPELINES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from devicepipe.pipelines import says
from devicepipe.pipelines.ecg import run_ecg
from devicepipe.pipelines.many import RunGroup, beats_group, one_at_a_time
from devicepipe.pipelines.score import run_score

__all__ = ["DATASET_PIPELINES", "PIPELINES", "Pipeline"]

ECG_FIGURES = ("extremes.png", "latent.png", "generated.png", "training.png")


@dataclass(frozen=True)
class Pipeline:
    """One pipeline: its name, its report page, its runs on many recordings, its words."""

    name: str
    page: str  # the kind of report page its runs write
    run_many: RunGroup | None  # a group of recordings from a folder (None: not on folders)
    says: Callable[[Any], list[str]]  # what the command line prints of a finished run (its result)
    open_first: tuple[str, ...] = ()  # figures to open after report.html


PIPELINES = MappingProxyType(
    {
        "beats": Pipeline("beats", "beats", beats_group, says.beats_lines),
        "ecg": Pipeline("ecg", "ecg", one_at_a_time(run_ecg), says.ecg_lines, ECG_FIGURES),
        "score": Pipeline(
            "score", "score", one_at_a_time(run_score), says.score_lines, ("scores.png", "extremes.png", "latent.png")
        ),
        "score-series": Pipeline(
            "score-series",
            "score-series",
            None,
            says.score_series_lines,
            ("days.png", "extremes.png", "scores.png", "latent.png"),
        ),  # fmt: skip
        "train": Pipeline("train", "train", None, says.train_lines, ("training.png", "scores.png", "latent.png")),
        "series": Pipeline(
            "series", "series", None, says.series_lines, ("days.png", "extremes.png", "latent.png", "training.png")
        ),
    }
)

#: The pipelines a dataset command runs, by name: how each runs a group of recordings.
DATASET_PIPELINES: MappingProxyType[str, RunGroup] = MappingProxyType(
    {name: p.run_many for name, p in PIPELINES.items() if p.run_many is not None}
)
