"""``devicepipe demo``."""

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
    ECG,
    DemoEpochsOpt,
    DeviceOpt,
    ThreadsOpt,
)
from devicepipe.cli.printing import (
    console,
    epoch_bar,
    print_outputs,
    warn,
)
from devicepipe.pipelines import (
    PIPELINES,
    run_demo,
)
from devicepipe.pipelines.says import holter_lines, training_line


@app.command(cls=Command, short_help=summary("demo"))
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the demo's files.")] = Path("demo-run"),
    device: DeviceOpt = "auto",
    epochs: DemoEpochsOpt = ECG.epochs,
    threads: ThreadsOpt = None,
) -> None:
    """Simulate a 30-minute ECG with a few ectopic beats and run the whole ecg pipeline on it."""
    con = console()
    with epoch_bar(con, epochs or ECG.max_epochs, "training the VAE", exact=epochs is not None) as update:
        result = run_demo(out, device=device, epochs=epochs, threads=threads, progress=con.print, epoch_progress=update)
    con.print(training_line(result.run.summary), markup=False)
    for warning in result.run.summary.warnings or []:
        warn(con, warning)
    con.print(
        f"{result.run.summary.counts.flagged} beats flagged as anomalous; {result.ectopic_flagged} of the "
        f"{result.n_ectopic} simulated ventricular ectopic beats are among them"
    )
    for line in holter_lines(result.run.summary.holter):  # the answer last, as every command ends
        con.print(line, markup=False)
    print_outputs(con, result.run, list(PIPELINES["ecg"].open_first))
