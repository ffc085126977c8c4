"""Options shared by several commands: choices from the library's own lists, and how a value given
on the command line is read."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from devicepipe.ecg import ECG_PEAK_METHODS, SEGMENT_MODES
from devicepipe.errors import DevicepipeError
from devicepipe.io import DUPLICATE_POLICIES, NAN_POLICIES, OverrideRate
from devicepipe.pipelines import (
    LearnSettings,
    SeriesLearnSettings,
)
from devicepipe.scorers import SCORERS


def _choices(name: str, values: Any) -> type[StrEnum]:
    """A str Enum of the library's accepted values, for typer to list and check."""
    return StrEnum(name, {str(v): str(v) for v in values})


NanPolicy = _choices("NanPolicy", NAN_POLICIES)
DuplicatePolicy = _choices("DuplicatePolicy", DUPLICATE_POLICIES)
PeakMethod = _choices("PeakMethod", ECG_PEAK_METHODS)
SegmentMode = _choices("SegmentMode", SEGMENT_MODES)

DeviceOpt = Annotated[str, typer.Option("--device", "-d", help="auto, cpu, cuda or cuda:N.")]
EcgChannelOpt = Annotated[
    str | None,
    typer.Option(
        "--channel",
        "-c",
        help="Channel or column, by name or position (default: the first signal named as an ECG lead in an EDF "
        "or WFDB record, the first column after any time or sample-number columns in a table, else the first); "
        "'all' finds the beats on every lead together (a flat or noisy lead left out) and cuts them from the first.",
    ),
]
EncodingOpt = Annotated[
    str | None,
    typer.Option(help="Text encoding of a CSV, e.g. latin-1 (default: UTF-8, or UTF-16 by its mark)."),
]
TimeFormatOpt = Annotated[
    str | None,
    typer.Option(
        help="How the time column is written, in strptime codes (e.g. '%d/%m/%Y %H:%M' for day-first dates); "
        "default: ISO 8601 and the common forms."
    ),
]
NanOpt = Annotated[
    NanPolicy,
    typer.Option(
        help="Non-finite samples (NaN, inf, numbers beyond float32): error (the default, naming the first), "
        "drop their time points, or interpolate them."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
MinQualityOpt = Annotated[
    float | None,
    typer.Option(
        help="Leave beats in stretches of poor signal out of training (and, for ecg, out of the flags): those in "
        "a 10-s stretch whose beats' median correlation with the recording's typical beat is under this "
        "(say 0.5). A beat unlike the typical one in good signal stays (it may be the anomaly). Counted in "
        "summary.json.",
    ),
]


def _maybe_int(value: str | None) -> str | int | None:
    """A column given on the command line: a position when it is a whole number, else a name."""
    if value is None:
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def _columns(values: list[str] | None) -> list[str | int] | None:
    if not values:
        return None
    return [_maybe_int(v) for v in values]


WorkersOpt = Annotated[
    int | None,
    typer.Option(
        help="For a folder, glob or list of recordings: Dask worker processes of the local cluster started here "
        "(default: one per core; the cores are divided among them; at most 4 a core, and no more than "
        "there are recordings), or 0 for a plain loop without Dask.",
        min=0,
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(
        help="For many recordings: the address of a running Dask scheduler (e.g. tcp://10.0.0.5:8786) to run on "
        "instead of a local cluster; its workers must see the same paths."
    ),
]
DevicesOpt = Annotated[
    str | None,
    typer.Option(
        help="For many recordings: one device per worker, comma-separated (e.g. cuda:0,cuda:1: one worker per GPU)."
    ),
]
ONE_ECG = "ECG: CSV, Parquet, NPY, EDF/BDF or WFDB record (e.g. mitdb/100)"
DATASET_INPUT = (
    "; or many: a folder, a quoted glob ('data/**/*.hea') or a .txt file listing paths, each written to its own "
    "run directory under --out with index.parquet"
)


ECG, SERIES = LearnSettings, SeriesLearnSettings  # the defaults of each learning command
EpochsOpt = Annotated[
    int | None,
    typer.Option(
        help="Train exactly N epochs. Default: until the validation loss stops improving (at most --max-epochs), "
        "keeping the best epoch's weights.",
        min=1,
    ),
]
MaxEpochsOpt = Annotated[int, typer.Option(help="The most epochs training may run when it stops by itself.", min=1)]
#: The demo's --epochs: it has no --max-epochs to point to.
DemoEpochsOpt = Annotated[
    int | None,
    typer.Option(
        help="Train exactly N epochs. Default: until the validation loss stops improving, keeping the best "
        "epoch's weights.",
        min=1,
    ),
]
BatchOpt = Annotated[int, typer.Option(help="Rows per training batch.", min=1)]
LrOpt = Annotated[float, typer.Option(help="Adam learning rate.", min=1e-7, max=0.99)]
EnsembleOpt = Annotated[int, typer.Option(help="Train N models at once with torch.func.vmap (N > 1).", min=1, max=64)]
SeedOpt = Annotated[int, typer.Option(help="Random seed (split, initialisation, batch order, noise).")]
PercentileOpt = Annotated[
    float, typer.Option(help="Flag rows scoring above this percentile of the training rows.", min=50, max=99.999)
]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")]
TensorboardOpt = Annotated[Path | None, typer.Option(help="Also log losses for TensorBoard to this directory.")]
Bf16Opt = Annotated[bool, typer.Option("--bf16", help="bfloat16 autocast (CUDA only).")]
Scorer = _choices("Scorer", SCORERS)
ScorerOpt = Annotated[
    Scorer | None,
    typer.Option(
        help="How a row is scored. local (default): at its own resolution and at halves of it down to 8 samples, "
        "how far it lies from the nearest weighted mean of its nearest training rows past the k - 1 nearest, as "
        "a robust z-score, the largest; multiscale: the distance to the k nearest training rows at halves down to "
        "16 samples; knn: that distance at its own resolution; reconstruction: the model's reconstruction error; "
        "combined: knn and reconstruction as robust z-scores. (A series scored point by point takes reconstruction.)",
        show_default=False,
    ),
]
NeighboursOpt = Annotated[
    int | None,
    typer.Option(
        help="k of the local, multiscale and knn scorers (local: rows are rebuilt past their k - 1 nearest). "
        "Default: floor(share flagged x training rows) + 1, so that a group of anomalous training rows up to that "
        "share cannot hide each other.",
        min=1,
        show_default=False,
    ),
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        help="CPU threads for training and scoring. Default: 1 for small models, every core for large ones "
        "(or the DEVICEPIPE_THREADS environment variable).",
        min=1,
    ),
]


ModelOpt = Annotated[
    Path,
    typer.Option(
        "--model",
        "-m",
        help="The model: a run directory of 'ecg' or 'train' (its model.pt), or a model.pt file.",
    ),
]


def _split(text: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Run directory for every output.")]
OverrideRateOpt = Annotated[
    bool,
    typer.Option(
        "--override-rate",
        help="Read the recording at --sampling-rate even where it states another rate (summary.json records both); "
        "without it, a rate that contradicts the recording's own is refused.",
    ),
]


def _rate(sampling_rate: float | None, override_rate: bool) -> float | None:
    """The --sampling-rate to read at: as given, or (``--override-rate``) over the recording's own."""
    if override_rate and sampling_rate is None:
        raise DevicepipeError("--override-rate says to read at --sampling-rate; give it, e.g. --sampling-rate 250.")
    return OverrideRate(sampling_rate) if override_rate else sampling_rate


RateOpt = Annotated[
    float | None,
    typer.Option(help="Sampling rate in Hz, for a file that does not say (CSV, NPY); see --override-rate."),
]
LatentOpt = Annotated[int, typer.Option(help="Latent dimensions of the VAE.", min=1, max=64)]
WidthOpt = Annotated[int, typer.Option(help="Samples per beat row (a power of two).", min=8)]
EcgModeOpt = Annotated[
    SegmentMode,
    typer.Option(
        help="centered (the default here): a fixed window around each R peak, 0.25 s before to 0.45 s after, "
        "so a premature beat is cut like any other; seed (the default of 'beats', the notebook's matrix): "
        "peak to peak, zero-padded."
    ),
]

Settings = TypeVar("Settings", bound=LearnSettings)


def learn_settings(cls: type[Settings], given: Mapping[str, Any]) -> Settings:
    """The settings ``cls`` from a command's parameters (its ``locals()``): every field of ``cls``
    the command has, a choice as its value and a path as text."""
    values = {}
    for field in dataclasses.fields(cls):
        if field.name in given:
            value = given[field.name]
            if isinstance(value, Enum):
                value = value.value
            values[field.name] = str(value) if isinstance(value, Path) else value
    return cls(**values)
