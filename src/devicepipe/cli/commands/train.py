"""``devicepipe train``."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Annotated

import torch
import typer
from rich.console import Console

from devicepipe.cli.application import (
    Command,
    app,
    summary,
)
from devicepipe.cli.options import (
    ECG,
    BatchOpt,
    Bf16Opt,
    DeviceOpt,
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
    OverrideRateOpt,
    PercentileOpt,
    RateOpt,
    ResumeOpt,
    ScorerOpt,
    SeedOpt,
    SegmentMode,
    ThreadsOpt,
    WidthOpt,
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
from devicepipe.core.units import parse_bytes
from devicepipe.learning.train import distributed, start_distributed
from devicepipe.pipelines import (
    BEAT_WIDTH,
    ECG_MODE,
    LearnResult,
    LearnSettings,
    run_train,
)

_BUDGET = Annotated[
    str | None,
    typer.Option(
        help="Device memory for the beats, e.g. 8GB.",
        metavar="SIZE",
    ),
]


@app.command(cls=Command, short_help=summary("train"))
def train(
    input: Annotated[
        Path,
        typer.Argument(help="ECGs: a folder, a quoted glob or a .txt list, or a 'beats' run on many."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Model directory for every output.", metavar="DIR")],
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
    scorer: ScorerOpt = None,
    neighbours: NeighboursOpt = None,
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    min_quality: MinQualityOpt = None,
    resume: ResumeOpt = False,
    bf16: Bf16Opt = False,
    threads: ThreadsOpt = None,
    memory_budget: _BUDGET = None,
) -> None:
    """Train one model of normal beats on many recordings, for 'devicepipe score' to apply to any other.

    Each recording's beats are standardised on their own, then all train one VAE. On several
    devices: torchrun --nproc-per-node N -m devicepipe train ... (DistributedDataParallel: NCCL
    on CUDA, one GPU per process; gloo on the CPU); rank 0 writes the model.
    """
    settings = learn_settings(LearnSettings, locals())
    joined = start_distributed(device)
    rank, world = distributed()
    con = console() if rank == 0 else Console(file=io.StringIO())
    if joined is not None:
        con.print(f"{world} processes (torchrun), this one on {joined}")
    bar = "training" if ensemble == 1 else f"training {ensemble} members"
    try:
        with epoch_bar(con, settings.epoch_limit, bar, exact=epochs is not None) as update:
            result = run_train(
                input, out, settings=settings, channel=maybe_int(channel),
                sampling_rate=rate(sampling_rate, override_rate), device=joined or device, mode=choice(mode),
                width=width, nan=choice(nan), encoding=encoding,
                min_quality=min_quality, progress=con.print, epoch_progress=update,
                memory_budget=None if memory_budget is None else parse_bytes(memory_budget),
            )  # fmt: skip
    finally:
        if joined is not None:
            torch.distributed.destroy_process_group()
    if rank == 0:
        _print_train(con, result)


def _print_train(con: Console, result: LearnResult) -> None:
    print_run(con, "train", result)
    con.print(f"score a recording with it: devicepipe score RECORDING --model {result.out} --out DIR", markup=False)
