"""The dataset commands' side of many recordings: the engine from the options, progress and the closing lines."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from devicepipe.artifacts.summaries import held
from devicepipe.batch import INDEX_NAME, DatasetResult, Engine, run_dataset
from devicepipe.cli.printing import (
    console,
)
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import format_duration
from devicepipe.ecg import EDGE_S, MATCH_TOLERANCE_S, BeatScore
from devicepipe.ecg.compiled import COMPILED_ENV


def engine_of(workers: int | None, scheduler: str | None, devices: str | None, device: str) -> Engine:
    listed = tuple(d.strip() for d in (devices or "").split(",") if d.strip())
    if devices is not None and not listed:
        raise DevicepipeError("--devices names no device; give e.g. --devices cuda:0,cuda:1.")
    if scheduler is not None and workers is not None:
        raise DevicepipeError("--workers starts a local cluster and --scheduler uses another; pass one of them.")
    return Engine(workers=workers, scheduler=scheduler, devices=listed or (device,))


def _dataset_reference(reference: Path | None) -> str | None:
    """In a dataset run, --reference is an annotation extension: every record's own file."""
    if reference is None:
        return None
    text = str(reference)
    if not re.fullmatch(r"\w+", text):
        raise DevicepipeError(
            f"--reference {text}: for many recordings give an annotation extension (e.g. --reference atr), "
            "and each WFDB record is scored against its own RECORD.atr."
        )
    return text


def single_only(**given: Any) -> None:
    """Options that only mean something for many recordings, refused for one."""
    for name, value in given.items():
        if value is not None:
            raise DevicepipeError(f"--{name} is for many recordings (a folder, glob or list); drop it for one file.")


def one_recording() -> None:
    """What a command on one recording sets for its process: no compiled detector
    (:data:`~devicepipe.ecg.compiled.COMPILED_ENV`). Its one detection takes milliseconds on the
    tensor path, where loading the compiled code takes most of a second (0.9 s on the 2-core
    machine: benchmarks/results/compile_once.md); a command on many recordings keeps it, as
    their calls pay for it. Set in the environment, the user's choice stands."""
    os.environ.setdefault(COMPILED_ENV, "0")


def run_dataset_cli(
    kind: str,
    input: Path,
    out: Path,
    options: dict[str, Any],
    engine: Engine,
    reference: Path | None,
    resume: bool,
) -> None:
    """Run ``kind`` on every recording ``input`` names, with a progress bar; exit 1 when any failed."""
    con = console()
    counts = {"ok": 0, "failed": 0}
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[green]{task.fields[ok]} ok[/green] [red]{task.fields[failed]} failed[/red]"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=con,
        disable=not con.is_terminal,
    )
    task = progress.add_task("recordings", total=None, ok=0, failed=0)

    def start(total: int, to_run: int) -> None:
        kept = f" ({total - to_run:,} complete from an earlier run)" if total != to_run else ""
        con.print(f"{total:,} recording{'' if total == 1 else 's'} in {input}{kept}")
        progress.update(task, total=total)

    def cluster(how: dict[str, Any]) -> None:
        if how["kind"] == "loop":
            con.print("running in this process, one recording after another (--workers 0)")
            return
        where = f"the Dask scheduler at {how['scheduler']}" if how["scheduler"] else "a local Dask cluster"
        threads = f", {how['threads_per_worker']} torch thread(s) each" if how["threads_per_worker"] else ""
        n = how["workers"]
        con.print(f"running on {where}: {n} worker{'s' if n != 1 else ''}{threads}")
        if how["dashboard"]:
            con.print(f"dashboard: {how['dashboard']}")

    def rows(done: list[dict[str, Any]]) -> None:
        for row in done:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
            if row["status"] == "failed":
                progress.console.print(f"[red]failed:[/red] {row['path']}: {row['error']}")
        progress.update(task, advance=len(done), ok=counts["ok"], failed=counts["failed"])

    with progress:
        result = run_dataset(
            input,
            out,
            kind=kind,
            options=options,
            engine=engine,
            reference=_dataset_reference(reference),
            resume=resume,
            on_start=start,
            on_rows=rows,
            on_cluster=cluster,
        )
    _print_dataset(con, result)
    if reference is not None and result.n_ok and not result.summary.accuracy:
        con.print(
            f"[yellow]no record had a .{reference} file beside it (RECORD.{reference} next to RECORD.hea): "
            "none was scored[/yellow]"
        )
    if result.n_failed:
        raise typer.Exit(1)


def _print_dataset(con: Console, result: DatasetResult) -> None:
    s = result.summary
    if held(s.beats) is not None:
        flagged = "" if held(s.flagged) is None else f", {s.flagged:,} flagged"
        con.print(
            f"{s.beats:,} beats found{flagged} in {format_duration(s.duration_s)} of recordings; "
            f"{s.seconds['wall']:.1f} s wall"
        )
    acc = s.accuracy
    if acc:
        con.print(
            f"accuracy against each record's .{acc.reference}, {acc.records_scored} record(s) "
            f"(a match within {1000 * MATCH_TOLERANCE_S:.0f} ms, all but the first and last {EDGE_S:g} s): "
            + BeatScore(acc.tp, acc.fp, acc.fn).shares()
        )
    kept = f" ({result.n_resumed:,} from an earlier run)" if result.n_resumed else ""
    line = f"{result.n_ok:,} ok{kept}, {result.n_failed:,} failed: see {result.out / INDEX_NAME}"
    con.print(f"[bold]{line}[/bold]" if not result.n_failed else f"[bold red]{line}[/bold red]")
