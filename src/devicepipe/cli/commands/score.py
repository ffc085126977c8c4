"""``devicepipe score``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from devicepipe.anomaly import BeatAnomalyDetector, load_model
from devicepipe.batch import is_dataset
from devicepipe.cli.application import (
    Command,
    app,
    summary,
)
from devicepipe.cli.many import (
    engine_of,
    one_recording,
    run_dataset_cli,
    single_only,
)
from devicepipe.cli.options import (
    DATASET_INPUT,
    ONE_ECG,
    DeviceOpt,
    DevicesOpt,
    EcgChannelOpt,
    EncodingOpt,
    ModelOpt,
    NanOpt,
    NanPolicy,
    OutOpt,
    OverrideRateOpt,
    RateOpt,
    SchedulerOpt,
    TimeFormatOpt,
    WorkersOpt,
    choice,
    maybe_int,
    rate,
)
from devicepipe.cli.printing import (
    console,
    print_run,
)
from devicepipe.core.errors import DevicepipeError
from devicepipe.pipelines import (
    model_input,
    run_score,
    run_score_series,
)

_TIME_COLUMN = Annotated[
    str | None,
    typer.Option(help="A load series' column of times.", metavar="NAME"),
]
_REFERENCE = Annotated[
    Path | None,
    typer.Option(
        help="Labelled reference beats (a .atr, a truth CSV); for a series model, listed anomalous days "
        "(a table with a column 'day' and, optionally, 'kind').",
        metavar="PATH",
    ),
]


@app.command(cls=Command, short_help=summary("score"))
def score(
    input: Annotated[
        Path,
        typer.Argument(help=ONE_ECG + DATASET_INPUT + "; or a load series, for a series model."),
    ],
    model: ModelOpt,
    out: OutOpt,
    device: DeviceOpt = "auto",
    channel: EcgChannelOpt = None,
    time_column: _TIME_COLUMN = None,
    time_format: TimeFormatOpt = None,
    sampling_rate: RateOpt = None,
    override_rate: OverrideRateOpt = False,
    reference: _REFERENCE = None,
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="Many recordings: skip those done.")] = False,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    devices: DevicesOpt = None,
) -> None:
    """Score the beats of new recordings with a model trained earlier, against its own threshold.

    The beats are found and cut as the model's were, standardised by each recording's own
    beats, and each gets a score, a flag and a tail probability (the share of the model's
    training beats that scored as high). A model trained on a GPU scores on a CPU and the reverse.
    With a model from 'devicepipe series', the windows (days) of a new period of a load series
    are scored the same way, scaled as the model's training series was (-c names its column).
    """
    many = is_dataset(input)
    named = model.resolve() if model.exists() else model
    fitted = load_model(named, "cpu" if many else device)  # a bad model: one line, before any cluster starts
    if model_input(fitted) == "load-windows":
        _score_series(input, fitted, out, device, channel, time_column, time_format, nan, encoding, reference,
                      sampling_rate=sampling_rate, resume=resume, workers=workers, scheduler=scheduler,
                      devices=devices)  # fmt: skip
        return
    if time_column is not None or time_format is not None:
        raise DevicepipeError("--time-column and --time-format are for a model from 'devicepipe series'.")
    options = {
        "channel": maybe_int(channel),
        "sampling_rate": rate(sampling_rate, override_rate),
        "nan": choice(nan),
        "encoding": encoding,
    }
    if many:
        engine = engine_of(workers, scheduler, devices, device)
        run_dataset_cli("score", input, out, {"model": str(named), **options}, engine, reference, resume)
        return
    single_only(workers=workers, scheduler=scheduler, devices=devices)
    one_recording()
    if resume:
        raise DevicepipeError("--resume is for many recordings; scoring one recording starts afresh.")
    con = console()
    result = run_score(input, out, model=fitted, device=device, reference=reference, progress=con.print, **options)
    print_run(con, "score", result)


def _score_series(
    input: Path,
    model: BeatAnomalyDetector,
    out: Path,
    device: str,
    column: str | None,
    time_column: str | None,
    time_format: str | None,
    nan: NanPolicy,
    encoding: str | None,
    reference: Path | None,
    **ecg_only: Any,
) -> None:
    """``score`` with a model of load-series windows: one series, scored and printed."""
    given = [f"--{name.replace('_', '-')}" for name, value in ecg_only.items() if value not in (None, False)]
    if given:
        raise DevicepipeError(f"{given[0]} is not for a load-series model (from 'devicepipe series'); drop it.")
    if is_dataset(input):
        raise DevicepipeError("a load-series model scores one series at a time; give one CSV or Parquet file.")
    con = console()
    result = run_score_series(
        input, out, model=model, column=maybe_int(column), time_column=maybe_int(time_column),
        time_format=time_format, reference=reference, device=device, nan=choice(nan), encoding=encoding,
        progress=con.print,
    )  # fmt: skip
    print_run(con, "score-series", result)
