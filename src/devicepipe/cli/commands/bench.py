"""``devicepipe bench``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from devicepipe.bench.report import (
    SECTIONS,
    bench_devices,
    check_only,
    load_result,
    markdown,
    run_benchmarks,
    write_report,
)
from devicepipe.bench.report import compare as compare_results
from devicepipe.bench.stages import STAGES
from devicepipe.cli.application import (
    Command,
    app,
    summary,
)
from devicepipe.cli.options import (
    split,
)
from devicepipe.cli.printing import (
    console,
    ms,
)
from devicepipe.core.errors import DevicepipeError
from devicepipe.io import check_output_dir


@app.command(cls=Command, short_help=summary("bench"))
def bench(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Directory for report.html, bench.json, bench.md and charts.")
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device", "-d", help="Comma-separated devices, e.g. cpu,cuda (default: cpu, and cuda if present)."
        ),
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Tiny sizes: checks that every benchmark runs.")] = False,
    only: Annotated[
        str | None,
        typer.Option(
            help=f"Comma-separated sections ({', '.join(SECTIONS)}) or stages (e.g. {', '.join(STAGES[:3])})."
        ),
    ] = None,
    samples: Annotated[
        int | None, typer.Option(help="Samples of the simulated ECG (default 20 M; quick 200 k).", min=10_000)
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None, typer.Option(help="Print the ratios between two bench.json files.")
    ] = (None),
) -> None:
    """Time every stage on every device, the notebooks' way, peers and the tutorials' micro-benchmarks."""
    con = console()
    if compare is not None:
        a, b = (load_result(p) for p in compare)
        rows = compare_results(a, b)
        if not rows:
            raise DevicepipeError("the two files share no measurement to compare; run the same benchmarks in both.")
        table = Table(title=f"A = {compare[0]}, B = {compare[1]}")
        for col in ("measurement", "A", "B", "A / B"):
            table.add_column(col, justify="right" if col != "measurement" else "left")
        for r in rows:
            table.add_row(r["name"], ms(r["a_s"]), ms(r["b_s"]), f"{r['ratio']:.2f}")
        con.print(table)
        return
    if out is None:
        raise DevicepipeError("bench needs --out DIR (or --compare A.json B.json).")
    check_output_dir(out)
    devices = bench_devices(split(device))
    wanted = check_only(split(only) or []) if only else None
    with con.status("benchmarking ...") as status:
        result = run_benchmarks(
            devices,
            quick=quick,
            only=wanted,
            n_samples=samples,
            progress=lambda m: status.update(f"benchmarking: {m} ..."),
        )
        files = write_report(result, out)
    con.print(markdown(result))
    con.print(f"wrote {', '.join(str(p) for p in files.values())}")
    if "report.html" in files:
        con.print(f"open first: {files['report.html']}")
