"""``devicepipe interop``."""

from __future__ import annotations

import datetime
import json
import sys
from typing import Annotated

import torch
import typer
from rich.table import Table

from devicepipe.bench.interop import handoff_comparison, installed_kinds, interop_matrix
from devicepipe.bench.report import (
    format_ratio,
)
from devicepipe.bench.results import source_commit
from devicepipe.cli.application import (
    Command,
    app,
    summary,
)
from devicepipe.cli.options import (
    JsonOpt,
)
from devicepipe.cli.printing import (
    console,
    ms,
)
from devicepipe.core.device import device_report


@app.command(cls=Command, short_help=summary("interop"))
def interop(
    size: Annotated[
        int, typer.Option(help="Elements of the float32 array converted (default 100 M = 400 MB).", min=1)
    ] = (100_000_000),
    repeats: Annotated[int, typer.Option(help="Timed repeats per conversion (median shown).", min=1)] = 3,
    as_json: JsonOpt = False,
) -> None:
    """Which libraries hand data to which without a copy, proven by pointer, and how long each way takes."""
    con = console()
    kinds = installed_kinds()
    with con.status("converting ...") as status:
        pairs = interop_matrix(size, kinds, repeats=repeats, progress=lambda m: status.update(f"converting {m} ..."))
        status.update("timing the host round trip against the zero-copy handoff ...")
        handoff = handoff_comparison(size, repeats=repeats)
    if as_json:
        sys.stdout.write(
            json.dumps(
                {
                    "date": datetime.datetime.now().isoformat(timespec="seconds"),
                    "commit": source_commit(),  # the code measured (None outside a git checkout)
                    "machine": device_report(),
                    "threads": torch.get_num_threads(),
                    "size": size,
                    "kinds": kinds,
                    "pairs": [p.__dict__ for p in pairs],
                    "handoff": handoff,
                },
                indent=2,
            )
            + "\n"
        )
        return
    table = Table(title=f"source -> target, {size:,} float32 elements ({size * 4 / 1e6:,.0f} MB), median of {repeats}")
    table.add_column("source \\ target")
    for k in kinds:
        table.add_column(k, justify="center")
    cells = {(p.source, p.target): p for p in pairs}
    style = {"zero-copy": "green", "copy": "yellow", "unsupported": "dim"}
    for src in kinds:
        row = []
        for dst in kinds:
            p = cells[(src, dst)]
            row.append(f"[{style[p.status]}]{p.status}[/{style[p.status]}]\n{ms(p.seconds)}")
        table.add_row(src, *row)
    con.print(table)
    missing = [
        k for k in ("torch", "numpy", "pyarrow", "pandas", "polars", "jax", "cupy", "cudf", "numba") if k not in kinds
    ]
    if missing:
        con.print(f"not available here: {', '.join(missing)}")
    slow, fast = handoff["naive_host_round_trip"], handoff["zero_copy_handoff"]
    con.print(
        f"{handoff['source']} column -> torch on {handoff['device']}: host round trip {ms(slow['median_s'])}, "
        f"zero-copy handoff {ms(fast['median_s'])} (shares memory: {handoff['handoff_shares_memory']}), "
        f"{format_ratio(handoff['speedup'])}"
    )
