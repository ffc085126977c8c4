"""Pipelines: the stages of one recording in order, on one device, timed, their outputs written.

Each ``run_*`` reads like the data flow: read -> segment -> (scale -> learn -> score) ->
copy back -> write. The stages live in their own modules (:mod:`~devicepipe.io`,
:mod:`~devicepipe.ecg`, :mod:`~devicepipe.signal.windows`, :mod:`~devicepipe.signal.scale`,
:mod:`~devicepipe.learning.learn`, :mod:`~devicepipe.learning.score`, :mod:`~devicepipe.artifacts.write`). These
functions never print; progress goes to optional callbacks. ``"auto"`` devices are resolved
here, once.

One module per pipeline (:mod:`.beats`, :mod:`.ecg`, :mod:`.score`, :mod:`.train`,
:mod:`.series`, :mod:`.demo`); what they share in :mod:`.context` (defaults, the run in
progress), :mod:`.reading` (an ECG read and its beats found), :mod:`.checks`, :mod:`.quality`,
:mod:`.learning` and :mod:`.beats_finish`; their results in :mod:`.results`.
"""

from __future__ import annotations

from devicepipe.core.timing import StageTimer
from devicepipe.ecg import ecg_segment
from devicepipe.io.chunks import recording_length
from devicepipe.learning.learn import LearnSettings, SeriesLearnSettings
from devicepipe.pipelines.beats import run_beats, run_beats_many
from devicepipe.pipelines.beats_finish import BeatsOptions
from devicepipe.pipelines.checks import rate_warnings
from devicepipe.pipelines.chunked import check_settings
from devicepipe.pipelines.context import BEAT_WIDTH, BEATS_MODE, ECG_MODE, SERIES_HIDDEN, SERIES_WINDOW
from devicepipe.pipelines.demo import run_demo
from devicepipe.pipelines.ecg import run_ecg
from devicepipe.pipelines.learning import MODEL_INPUTS, beat_rows, model_input
from devicepipe.pipelines.registry import DATASET_PIPELINES, PIPELINES, Pipeline
from devicepipe.pipelines.results import BeatsResult, DemoResult, LearnResult
from devicepipe.pipelines.score import run_score
from devicepipe.pipelines.series import run_score_series, run_series
from devicepipe.pipelines.train import run_train

__all__ = [
    "DATASET_PIPELINES",
    "PIPELINES",
    "Pipeline",
    "BeatsOptions",
    "BeatsResult",
    "DemoResult",
    "LearnResult",
    "LearnSettings",
    "SeriesLearnSettings",
    "StageTimer",
    "check_settings",
    "rate_warnings",
    "run_beats",
    "run_beats_many",
    "run_demo",
    "run_ecg",
    "MODEL_INPUTS",
    "model_input",
    "run_score",
    "run_score_series",
    "run_series",
    "run_train",
    "BEATS_MODE",
    "BEAT_WIDTH",
    "ECG_MODE",
    "SERIES_HIDDEN",
    "SERIES_WINDOW",
    "beat_rows",
    "ecg_segment",
    "recording_length",
]
