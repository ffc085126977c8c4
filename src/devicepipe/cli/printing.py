"""What several commands print: the console, progress bars, training lines and warnings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from devicepipe.pipelines import PIPELINES, BeatsResult, LearnResult


def console() -> Console:
    """Rich output on a terminal; elsewhere (a log, CI, a pipe) whole lines, not wrapped at 80 columns."""
    con = Console(highlight=False)
    if con.is_terminal:
        return con
    return Console(highlight=False, soft_wrap=True, width=max(con.width, 160))


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.2f} s"


@contextmanager
def epoch_bar(
    con: Console, epochs: int, label: str, *, exact: bool = False
) -> Iterator[Callable[[int, float, float], None]]:
    """Training progress: a bar on a terminal, shown from the first finished epoch (so an early
    error prints alone); elsewhere a plain line every twentieth of the epochs. ``exact``: training
    runs all ``epochs`` (else it may stop earlier)."""
    if not con.is_terminal:
        every = max(1, epochs // 20)
        of = "of" if exact else "of at most"

        def line(epoch: int, train: float, val: float) -> None:
            if epoch == 1 or epoch % every == 0 or epoch == epochs:
                con.print(f"{label}: epoch {epoch} {of} {epochs}, loss {train:.4g} (val {val:.4g})")

        yield line
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[loss]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=con,
        transient=False,
    )
    task = progress.add_task(label, total=epochs, loss="")

    def update(epoch: int, train: float, val: float) -> None:
        if not progress.live.is_started:
            progress.start()
        progress.update(task, completed=epoch, loss=f"loss {train:.4g} (val {val:.4g})")

    try:
        yield update
    finally:
        if progress.live.is_started:
            progress.stop()


def print_outputs(con: Console, result: LearnResult, first: list[str]) -> None:
    files = result.files
    con.print(f"outputs in [bold]{result.out}[/bold]: {', '.join(sorted(p.name for p in files.values()))}")
    if "report.html" in files:
        con.print(f"open first: {result.out / 'report.html'} (it shows {', '.join(f for f in first if f in files)})")


def print_run(con: Console, kind: str, result: LearnResult | BeatsResult) -> None:
    """What the command line says of a finished run of the pipeline ``kind`` (its lines in
    :data:`~devicepipe.pipelines.PIPELINES`), its warnings (on stderr), and where its files are."""
    pipeline = PIPELINES[kind]
    for line in pipeline.says(result):
        con.print(line, markup=False)
    if isinstance(result, BeatsResult):
        con.print(f"wrote {', '.join(str(p) for p in result.files.values())}", markup=False)
        for warning in result.warnings:
            warn(con, warning)
        if "report.html" in result.files:
            con.print(f"open first: {result.files['report.html']}", markup=False)
        return
    for warning in result.summary.warnings or []:
        warn(con, warning)
    print_outputs(con, result, list(pipeline.open_first))


def warn(con: Console, warning: str) -> None:
    """A warning on stderr (so that it shows even when the output is piped), in colour on a terminal."""
    err = Console(stderr=True, highlight=False, soft_wrap=not con.is_terminal)
    err.print(f"[bold yellow]warning:[/bold yellow] {warning}")
