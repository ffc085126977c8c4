"""``devicepipe read``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from devicepipe.cli.application import (
    Command,
    app,
    summary,
)
from devicepipe.cli.options import (
    DeviceOpt,
    DuplicatePolicy,
    EncodingOpt,
    JsonOpt,
    NanOpt,
    NanPolicy,
    TimeFormatOpt,
    choice,
    columns,
    maybe_int,
)
from devicepipe.cli.printing import (
    console,
)
from devicepipe.core.units import format_duration
from devicepipe.io import read_series
from devicepipe.io.channels import time_column_of


def _print_summary(summary: dict[str, Any], con: Console) -> None:
    rate = summary["sampling_rate_hz"]
    dur = summary["duration_s"]
    con.print(
        f"[bold]{summary['source']}[/bold]: {summary['n_samples']:,} samples x {len(summary['channels'])} channel(s), "
        f"{summary['dtype']} on {summary['device']}"
    )
    said = "unknown" if rate is None else f"{rate:g} Hz"
    if rate is not None and 0 < rate < 1:  # a meter's rate reads better as its step
        said += f" (a sample every {format_duration(1 / rate)})"
    con.print(f"sampling rate: {said}; duration: {'unknown' if dur is None else format_duration(dur)}")
    if summary["n_nan"]:
        con.print(f"non-finite values: {summary['n_nan']:,} ({summary['nan_policy']})")
    table = Table()
    for col in ("channel", "unit", "min", "max", "mean", "std"):
        table.add_column(col, justify="right" if col not in ("channel", "unit") else "left")
    for s in summary["channels"]:
        table.add_row(s["channel"], s["unit"] or "-", *(f"{s[k]:.4g}" for k in ("min", "max", "mean", "std")))
    con.print(table)
    t = summary["time"]
    if t is not None:
        step = format_duration(t["step_s"]) if t["step_s"] >= 1 else f"{t['step_s']:g} s"
        con.print(f"time column: {t['n_rows']:,} rows, {t['start']} to {t['end']}, step {step}")
        con.print(f"  sorted on input: {'yes' if t['was_sorted'] else 'no (sorted now)'}")
        con.print(
            f"  duplicate timestamps: {t['n_duplicates']} ({t['duplicates_policy']})"
            + (f", e.g. {', '.join(t['duplicates'][:3])}" if t["duplicates"] else "")
        )
        con.print(
            f"  gaps: {t['n_gaps']}, missing {t['missing_steps']} step(s)"
            + (f", e.g. {t['gaps'][0][0]} -> {t['gaps'][0][1]}" if t["gaps"] else "")
        )


@app.command("read", cls=Command, short_help=summary("read"))
def read_cmd(
    input: Annotated[Path, typer.Argument(help="CSV, TSV, Parquet, NPY, EDF/BDF or WFDB record.")],
    column: Annotated[
        list[str] | None,
        typer.Option(
            "--column",
            "--channel",
            "-c",
            help="Column or channel (name or position); repeatable.",
            metavar="NAME",
        ),
    ] = None,
    time_column: Annotated[
        str | None,
        typer.Option(
            help="Column of times: sorted, gaps reported.",
            metavar="NAME",
        ),
    ] = None,
    time_format: TimeFormatOpt = None,
    encoding: EncodingOpt = None,
    sampling_rate: Annotated[
        float | None, typer.Option(help="Sampling rate, when the file does not say.", metavar="HZ")
    ] = None,
    nan: NanOpt = NanPolicy["error"],
    duplicates: Annotated[
        DuplicatePolicy, typer.Option(help="With --time-column: rows sharing a timestamp.")
    ] = DuplicatePolicy["keep"],
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Read a recording onto the device and summarise it (shape, rate, statistics, time irregularities)."""
    times = maybe_int(time_column) if time_column is not None else time_column_of(input)
    rec = read_series(
        input,
        columns(column),
        device=device,
        sampling_rate=sampling_rate,
        time_column=times,
        time_format=time_format,
        encoding=encoding,
        nan=choice(nan),
        duplicates=choice(duplicates),
    )
    summary = rec.describe()
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return
    con = console()
    if time_column is None and times is not None:
        con.print(f"times from column {times!r}; --time-column picks another")
    _print_summary(summary, con)
    if rec.time_report is not None and rec.time_report.overlap is not None:
        # (a clock set back, or recordings joined: the ECG commands refuse such a recording)
        con.print(
            f"  the times go back into times they have held, first {rec.time_report.overlap_text()}: sorted, "
            "the samples of the stretches that share times are interleaved"
        )
