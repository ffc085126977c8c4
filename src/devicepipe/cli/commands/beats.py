"""``devicepipe beats``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import torch
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
    ONE_ECG,
    DeviceOpt,
    DevicesOpt,
    EcgChannelOpt,
    EncodingOpt,
    NanOpt,
    NanPolicy,
    OverrideRateOpt,
    PeakMethod,
    RateOpt,
    SchedulerOpt,
    SegmentMode,
    WorkersOpt,
    choice,
    maybe_int,
    rate,
)
from devicepipe.cli.printing import (
    console,
    print_run,
)
from devicepipe.core.units import parse_bytes
from devicepipe.pipelines import (
    BEATS_MODE,
    BeatsOptions,
    run_beats,
)

_OUT = Annotated[
    Path,
    typer.Option("--out", "-o", help="Run directory for every output.", metavar="DIR"),
]
_METHOD = Annotated[PeakMethod, typer.Option(help="ricker (accurate) or seed (the notebook's recipe).")]
_MODE = Annotated[
    SegmentMode,
    typer.Option(
        help="seed (the default here: peak to peak) or centered.",
        metavar="MODE",
        show_default=False,
    ),
]
_REFERENCE = Annotated[
    Path | None,
    typer.Option(
        help="Reference R peaks (a .atr, a CSV; many: atr).",
        metavar="PATH",
    ),
]
_FIGURES = Annotated[bool, typer.Option(help="Write the figures.")]
_STRICT = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Refuse beats that say a setting is wrong.",
    ),
]
_CHUNK = Annotated[
    str | None,
    typer.Option(
        help="Detect in chunks of this length, e.g. 10min.",
        metavar="DURATION",
    ),
]
_BUDGET = Annotated[
    str | None,
    typer.Option(
        help="Chunk when one piece needs more, e.g. 2GB.",
        metavar="SIZE",
    ),
]
_RESUME = Annotated[bool, typer.Option("--resume", help="Many recordings: skip those done.")]


@app.command(cls=Command, short_help=summary("beats"))
def beats(
    input: Annotated[Path, typer.Argument(help=ONE_ECG + DATASET_INPUT + ".")],
    out: _OUT,
    channel: EcgChannelOpt = None,
    sampling_rate: RateOpt = None,
    override_rate: OverrideRateOpt = False,
    method: _METHOD = PeakMethod["ricker"],
    mode: _MODE = SegmentMode[BEATS_MODE],
    reference: _REFERENCE = None,
    device: DeviceOpt = "auto",
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    figures: _FIGURES = True,
    strict: _STRICT = False,
    chunk: _CHUNK = None,
    memory_budget: _BUDGET = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    devices: DevicesOpt = None,
    resume: _RESUME = False,
) -> None:
    """Find the heartbeats of an ECG, class each (AAMI N, S, V, F, Q), count the ectopic burden and
    the Holter events (couplets, runs, bigeminy, pauses, atrial fibrillation and its kind), cut the
    beats into a fixed-width matrix and plot them. The report says how far the classes were
    validated on annotated recordings.

    Given a folder, a glob or a list of recordings, runs each (on a Dask cluster) into its own
    directory under --out, with index.parquet (one row per recording) and summary.json.
    """
    options = BeatsOptions(
        channel=maybe_int(channel),
        sampling_rate=rate(sampling_rate, override_rate),
        method=choice(method),
        mode=choice(mode),
        nan=choice(nan),
        encoding=encoding,
        figures=figures,
        strict=strict,
        chunk=chunk,
        memory_budget=None if memory_budget is None else parse_bytes(memory_budget),
    )
    if is_dataset(input):
        # no GPU, no transfers to count; the ledger would cost a fifth of a 10-s ECG's run
        many = dataclasses.replace(options, count_transfers=torch.cuda.is_available())
        engine = engine_of(workers, scheduler, devices, device)
        run_dataset_cli("beats", input, out, dataclasses.asdict(many), engine, reference, resume)
        return
    single_only(workers=workers, scheduler=scheduler, devices=devices, resume=resume or None)
    one_recording()
    con = console()
    with con.status("finding beats ...") as status:
        result = run_beats(
            input,
            out,
            device=device,
            reference=reference,
            progress=lambda msg: status.update(msg),
            **dataclasses.asdict(options),
        )
    print_run(con, "beats", result)
