"""``devicepipe ecg``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
    ECG,
    ONE_ECG,
    BatchOpt,
    Bf16Opt,
    DeviceOpt,
    DevicesOpt,
    EcgChannelOpt,
    EcgModeOpt,
    EncodingOpt,
    EnsembleOpt,
    EpochsOpt,
    LatentOpt,
    LrOpt,
    MaxEpochsOpt,
    MinEffectOpt,
    MinQualityOpt,
    NanOpt,
    NanPolicy,
    NeighboursOpt,
    OutOpt,
    OverrideRateOpt,
    PercentileOpt,
    RateOpt,
    ResumeOpt,
    SchedulerOpt,
    ScorerOpt,
    SeedOpt,
    SegmentMode,
    TensorboardOpt,
    ThreadsOpt,
    WidthOpt,
    WorkersOpt,
    choice,
    learn_settings,
    maybe_int,
    rate,
)
from devicepipe.cli.printing import (
    console,
    epoch_bar,
    print_run,
)
from devicepipe.pipelines import (
    BEAT_WIDTH,
    ECG_MODE,
    LearnSettings,
    run_ecg,
)

_ECG_REFERENCE = Annotated[
    Path | None,
    typer.Option(
        help="Labelled reference beats (a .atr, a truth CSV).",
        metavar="PATH",
    ),
]


@app.command(cls=Command, short_help=summary("ecg"))
def ecg(
    input: Annotated[Path, typer.Argument(help=ONE_ECG + DATASET_INPUT + ".")],
    out: OutOpt,
    device: DeviceOpt = "auto",
    channel: EcgChannelOpt = None,
    sampling_rate: RateOpt = None,
    override_rate: OverrideRateOpt = False,
    epochs: EpochsOpt = ECG.epochs,
    max_epochs: MaxEpochsOpt = ECG.max_epochs,
    batch_size: BatchOpt = ECG.batch_size,
    lr: LrOpt = ECG.lr,
    latent: LatentOpt = ECG.latent,
    ensemble: EnsembleOpt = ECG.ensemble,
    mode: EcgModeOpt = SegmentMode[ECG_MODE],
    width: WidthOpt = BEAT_WIDTH,
    seed: SeedOpt = ECG.seed,
    percentile: PercentileOpt = ECG.percentile,
    min_effect: MinEffectOpt = ECG.min_effect,
    reference: _ECG_REFERENCE = None,
    scorer: ScorerOpt = None,
    neighbours: NeighboursOpt = None,
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    min_quality: MinQualityOpt = None,
    resume: ResumeOpt = False,
    tensorboard: TensorboardOpt = None,
    bf16: Bf16Opt = False,
    threads: ThreadsOpt = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    devices: DevicesOpt = None,
) -> None:
    """The beats of an ECG classed (N, S, V, F, Q) with the Holter events and AF, as beats does; then a
    convolutional VAE trained on them, every beat scored and plotted.

    Many recordings: one run directory each, on Dask. Every option in full: docs/commands.md.
    """
    settings = learn_settings(LearnSettings, locals())
    cut = {
        "channel": maybe_int(channel),
        "sampling_rate": rate(sampling_rate, override_rate),
        "mode": choice(mode),
        "width": width,
        "nan": choice(nan),
        "encoding": encoding,
        "min_quality": min_quality,
    }
    if is_dataset(input):
        engine = engine_of(workers, scheduler, devices, device)
        run_dataset_cli("ecg", input, out, {"settings": settings, **cut}, engine, reference, resume)
        return
    single_only(workers=workers, scheduler=scheduler, devices=devices)
    one_recording()
    con = console()
    bar = "training" if ensemble == 1 else f"training {ensemble} members"
    with epoch_bar(con, settings.epoch_limit, bar, exact=epochs is not None) as update:
        result = run_ecg(
            input, out, settings=settings, device=device, reference=reference, progress=con.print,
            epoch_progress=update, **cut,
        )  # fmt: skip
    print_run(con, "ecg", result)
