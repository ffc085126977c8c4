"""``devicepipe series``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from devicepipe.cli.application import (
    Command,
    app,
    summary,
)
from devicepipe.cli.options import (
    SERIES,
    BatchOpt,
    DeviceOpt,
    EncodingOpt,
    EnsembleOpt,
    EpochsOpt,
    LrOpt,
    MaxEpochsOpt,
    MinEffectOpt,
    NanOpt,
    NanPolicy,
    NeighboursOpt,
    OutOpt,
    PercentileOpt,
    ResumeOpt,
    ScorerOpt,
    SeedOpt,
    TensorboardOpt,
    ThreadsOpt,
    TimeFormatOpt,
    choice,
    learn_settings,
    maybe_int,
)
from devicepipe.cli.printing import (
    console,
    epoch_bar,
    print_run,
)
from devicepipe.pipelines import (
    SERIES_HIDDEN,
    SERIES_WINDOW,
    SeriesLearnSettings,
    run_series,
)


@app.command(cls=Command, short_help=summary("series"))
def series(
    input: Annotated[Path, typer.Argument(help="A time-indexed load series: CSV or Parquet.")],
    out: OutOpt,
    column: Annotated[
        str | None, typer.Option("--column", "-c", help="The value column (default: the only one).", metavar="NAME")
    ] = None,
    time_column: Annotated[
        str | None,
        typer.Option(
            help="The column of times (default: found).",
            metavar="NAME",
        ),
    ] = None,
    time_format: TimeFormatOpt = None,
    window: Annotated[str, typer.Option(help="Window length: 1d, 12h, 1w ...", metavar="LENGTH")] = SERIES_WINDOW,
    pointwise: Annotated[bool, typer.Option("--pointwise", help="The notebook's per-sample autoencoder.")] = False,
    reference: Annotated[
        Path | None,
        typer.Option(
            help="Listed anomalous days to score the flags against: a CSV or Parquet table with a column 'day' "
            "(YYYY-MM-DD) and, optionally, 'kind' (the simulator's NAME.truth.csv is one).",
            metavar="PATH",
        ),
    ] = None,
    device: DeviceOpt = "auto",
    epochs: EpochsOpt = SERIES.epochs,
    max_epochs: MaxEpochsOpt = SERIES.max_epochs,
    batch_size: BatchOpt = SERIES.batch_size,
    lr: LrOpt = SERIES.lr,
    hidden: Annotated[int, typer.Option(help="Hidden units.", min=1)] = SERIES_HIDDEN,
    latent: Annotated[int, typer.Option(help="Code size.", min=1, max=256)] = SERIES.latent,
    ensemble: EnsembleOpt = SERIES.ensemble,
    seed: SeedOpt = SERIES.seed,
    percentile: PercentileOpt = SERIES.percentile,
    min_effect: MinEffectOpt = SERIES.min_effect,
    scorer: ScorerOpt = None,
    neighbours: NeighboursOpt = None,
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    resume: ResumeOpt = False,
    tensorboard: TensorboardOpt = None,
    threads: ThreadsOpt = None,
) -> None:
    """Cut a load series into windows (days by default), train an MLP autoencoder, flag anomalous windows.

    Each flagged window is said to be low (under the same weekday of nearby weeks: an outage,
    a holiday, a stuck meter) or high (a demand extreme). With --reference, the flags are
    scored against a list of known anomalous days, per kind.
    """
    settings = learn_settings(SeriesLearnSettings, locals())
    con = console()
    with epoch_bar(con, settings.epoch_limit, "training", exact=epochs is not None) as update:
        result = run_series(
            input, out, column=maybe_int(column), time_column=maybe_int(time_column), time_format=time_format,
            window=window, pointwise=pointwise, settings=settings, hidden=hidden, reference=reference, device=device,
            nan=choice(nan),
            encoding=encoding, progress=con.print, epoch_progress=update,
        )  # fmt: skip
    print_run(con, "series", result)
