"""Options shared by several commands: choices from the library's own lists, and how a value given
on the command line is read."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum, StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import typer

from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import ECG_PEAK_METHODS, SEGMENT_MODES
from devicepipe.io import DUPLICATE_POLICIES, NAN_POLICIES, OverrideRate
from devicepipe.io.formats import FORMAT_LABELS
from devicepipe.pipelines import (
    LearnSettings,
    SeriesLearnSettings,
)
from devicepipe.scorers import SCORERS


def _choices(name: str, values: Any) -> type[StrEnum]:
    """A str Enum of the library's accepted values, for typer to list and check."""
    return cast(type[StrEnum], StrEnum(name, {str(v): str(v) for v in values}))


if TYPE_CHECKING:  # each a str Enum, its members made from the library's own list below

    class NanPolicy(StrEnum): ...

    class DuplicatePolicy(StrEnum): ...

    class PeakMethod(StrEnum): ...

    class SegmentMode(StrEnum): ...

    class Scorer(StrEnum): ...

else:
    NanPolicy = _choices("NanPolicy", NAN_POLICIES)
    DuplicatePolicy = _choices("DuplicatePolicy", DUPLICATE_POLICIES)
    PeakMethod = _choices("PeakMethod", ECG_PEAK_METHODS)
    SegmentMode = _choices("SegmentMode", SEGMENT_MODES)
    Scorer = _choices("Scorer", SCORERS)

DeviceOpt = Annotated[str, typer.Option("--device", "-d", help="auto, cpu, cuda or cuda:N.", metavar="DEVICE")]
EcgChannelOpt = Annotated[
    str | None,
    typer.Option(
        "--channel",
        "-c",
        help="Lead or column (name or position), or 'all' (default: the ECG leads together).",
        metavar="NAME",
    ),
]
EncodingOpt = Annotated[
    str | None,
    typer.Option(help="CSV text encoding (default: UTF-8).", metavar="NAME"),
]
TimeFormatOpt = Annotated[
    str | None,
    typer.Option(
        help="strptime codes of the times, e.g. '%d/%m/%Y %H:%M'.",
        metavar="FORMAT",
    ),
]
NanOpt = Annotated[
    NanPolicy,
    typer.Option(help="error (default), drop or interpolate NaN/inf.", metavar="ACTION", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
MinQualityOpt = Annotated[
    float | None,
    typer.Option(
        help="Leave out beats in signal poorer than R (0.5).",
        metavar="R",
    ),
]


def choice(value: StrEnum) -> Any:
    """The library's value of a choice typer has checked against the library's own list (so of
    the type the library's parameter takes, a literal the type checker cannot follow through an
    Enum made at run time)."""
    return value.value


def maybe_int(value: str | None) -> str | int | None:
    """A column given on the command line: a position when it is a whole number, else a name."""
    if value is None:
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def columns(values: list[str] | None) -> list[str | int] | None:
    if not values:
        return None
    return [int(v) if v.lstrip("-").isdigit() else v for v in values]  # (as maybe_int reads each)


WorkersOpt = Annotated[
    int | None,
    typer.Option(
        help="Dask workers (default: one per core); 0: a loop.",
        metavar="N",
        min=0,
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(
        help="A running Dask scheduler's address, to run on.",
        metavar="ADDRESS",
    ),
]
DevicesOpt = Annotated[
    str | None,
    typer.Option(
        help="A device per worker, e.g. cuda:0,cuda:1.",
        metavar="LIST",
    ),
]
ONE_ECG = f"An ECG ({FORMAT_LABELS})"
DATASET_INPUT = ", or a folder, a quoted glob or a .txt list of them"


ECG, SERIES = LearnSettings, SeriesLearnSettings  # the defaults of each learning command
EpochsOpt = Annotated[
    int | None,
    typer.Option(
        help="Exactly N epochs (default: until learned).",
        metavar="N",
        min=1,
    ),
]
MaxEpochsOpt = Annotated[int, typer.Option(help="Most epochs to stop by itself.", min=1, metavar="N")]
#: The demo's --epochs: it has no --max-epochs to point to.
DemoEpochsOpt = Annotated[
    int | None,
    typer.Option(
        help="Exactly N epochs (default: until learned).",
        metavar="N",
        min=1,
    ),
]
BatchOpt = Annotated[int, typer.Option(help="Rows per training batch.", min=1, metavar="N")]
LrOpt = Annotated[float, typer.Option(help="Adam learning rate.", min=1e-7, max=0.99, metavar="RATE")]
EnsembleOpt = Annotated[int, typer.Option(help="N models at once (torch.func.vmap).", min=1, max=64, metavar="N")]
SeedOpt = Annotated[int, typer.Option(help="Random seed.", metavar="N")]
PercentileOpt = Annotated[
    float,
    typer.Option(help="Flag scores above this percentile.", min=50, max=99.999, metavar="P"),
]
MinEffectOpt = Annotated[
    float,
    typer.Option(help="Flag only rows differing by this share of a typical row.", min=0, max=1, metavar="SHARE"),
]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Continue the run in --out.")]
TensorboardOpt = Annotated[Path | None, typer.Option(help="Also log losses for TensorBoard here.", metavar="DIR")]
Bf16Opt = Annotated[bool, typer.Option("--bf16", help="bfloat16 autocast (CUDA only).")]
ScorerOpt = Annotated[
    Scorer | None,
    typer.Option(
        help="local (default), multiscale, knn, reconstruction, combined.",
        metavar="NAME",
        show_default=False,
    ),
]
NeighboursOpt = Annotated[
    int | None,
    typer.Option(
        help="k of the neighbour scorers (default: 1 % + 1).",
        metavar="K",
        min=1,
        show_default=False,
    ),
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        help="CPU threads (default: by the model's size).",
        metavar="N",
        min=1,
    ),
]


ModelOpt = Annotated[
    Path,
    typer.Option(
        "--model",
        "-m",
        help="A run directory (its model.pt) or a model.pt.",
        metavar="PATH",
    ),
]


def split(text: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Run directory for every output.", metavar="DIR")]
OverrideRateOpt = Annotated[
    bool,
    typer.Option(
        "--override-rate",
        help="Use --sampling-rate over the file's own.",
    ),
]


def rate(sampling_rate: float | None, override_rate: bool) -> float | None:
    """The --sampling-rate to read at: as given, or (``--override-rate``) over the recording's own."""
    if override_rate and sampling_rate is None:
        raise DevicepipeError("--override-rate says to read at --sampling-rate; give it, e.g. --sampling-rate 250.")
    return OverrideRate(sampling_rate) if override_rate and sampling_rate is not None else sampling_rate


RateOpt = Annotated[
    float | None,
    typer.Option(help="Sampling rate, for CSV and NPY files.", metavar="HZ"),
]
LatentOpt = Annotated[int, typer.Option(help="Latent dimensions of the VAE.", min=1, max=64, metavar="N")]
WidthOpt = Annotated[int, typer.Option(help="Samples per beat (a power of two).", min=8, metavar="N")]
EcgModeOpt = Annotated[
    SegmentMode,
    typer.Option(help="centered (the default here) or seed (peak to peak).", metavar="MODE", show_default=False),
]

Settings = TypeVar("Settings", bound=LearnSettings)


def learn_settings(cls: type[Settings], given: Mapping[str, Any]) -> Settings:
    """The settings ``cls`` from a command's parameters (its ``locals()``): every field of ``cls``
    the command has, a choice as its value and a path as text."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name in given:
            value = given[field.name]
            if isinstance(value, Enum):
                value = value.value
            values[field.name] = str(value) if isinstance(value, Path) else value
    return cls(**values)
