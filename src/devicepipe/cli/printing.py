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

from devicepipe.pipelines import (
    LearnResult,
)
from devicepipe.summaries import RunSummary


def _console() -> Console:
    """Rich output on a terminal; elsewhere (a log, CI, a pipe) whole lines, not wrapped at 80 columns."""
    con = Console(highlight=False)
    if con.is_terminal:
        return con
    return Console(highlight=False, soft_wrap=True, width=max(con.width, 160))


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.2f} s"


@contextmanager
def _epoch_bar(
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


def _print_outputs(con: Console, result: LearnResult, first: list[str]) -> None:
    files = result.files
    con.print(f"outputs in [bold]{result.out}[/bold]: {', '.join(sorted(p.name for p in files.values()))}")
    con.print("open first: " + ", ".join(str(result.out / f) for f in ["report.html", *first] if f in files))


ECG_FIGURES = ["extremes.png", "latent.png", "generated.png", "training.png"]


def _print_training(con: Console, s: RunSummary) -> None:
    """How long training ran, whose weights were kept, on how many threads; and, in colour, the
    warning when a model was still learning when training ended."""
    e, t = s.epochs, s.threads
    runs, kept = sorted(set(e.run)), sorted(set(e.kept))
    span = "-".join(map(str, runs[:: max(1, len(runs) - 1)]))
    if s.settings.get("epochs") is not None:
        trained = f"trained {span} epochs (as asked)"
    elif any(e.stopped_early):
        trained = f"trained {span} of at most {e.limit} epochs (stopped when the validation loss no longer improved)"
    else:
        trained = f"trained {span} of at most {e.limit} epochs (ran to the limit)"
    con.print(
        f"{trained}; kept the weights of epoch {'-'.join(map(str, kept[:: max(1, len(kept) - 1)]))}; "
        f"{t.threads} CPU thread{'s' if t.threads > 1 else ''} ({t.reason})"
    )
    for warning in s.warnings or []:
        _warn(con, warning)


def _warn(con: Console, warning: str) -> None:
    """A warning on stderr (so that it shows even when the output is piped), in colour on a terminal."""
    err = Console(stderr=True, highlight=False, soft_wrap=not con.is_terminal)
    err.print(f"[bold yellow]warning:[/bold yellow] {warning}")


def _final_loss(s: RunSummary) -> str:
    losses = s.final_loss.train
    if len(losses) == 1:
        return f"final loss {losses[0]:.4g}"
    return f"final loss {sum(losses) / len(losses):.4g} (mean of {len(losses)} members)"


def _print_labels(con: Console, s: RunSummary) -> None:
    """How many beats of each reference label were flagged, when the run had a reference."""
    if s.reference:
        con.print(
            f"flagged by reference label ({s.reference.source}): "
            + ", ".join(f"{name} {v.flagged:,} of {v.beats:,}" for name, v in s.reference.labels.items())
        )


def _print_aami(con: Console, s: RunSummary) -> None:
    aami = s.reference.aami if s.reference else {}
    if aami:
        con.print(
            "flag rate by AAMI class: "
            + ", ".join(f"{k} {100 * v.flag_rate:.1f} % ({v.flagged:,} of {v.beats:,})" for k, v in aami.items())
        )
