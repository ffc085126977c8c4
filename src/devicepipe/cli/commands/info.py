"""``devicepipe info``."""

from __future__ import annotations

import json
import sys

from rich.table import Table

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
    gib,
)
from devicepipe.core.device import device_report


@app.command(cls=Command, short_help=summary("info"))
def info(as_json: JsonOpt = False) -> None:
    """Show Python, PyTorch and its CUDA build, the GPUs, the CPU and which optional libraries work."""
    report = device_report()
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    con = console()
    t = report["torch"]
    con.print(f"[bold]devicepipe {report['devicepipe']}[/bold] on Python {report['python']} ({report['platform']})")
    con.print(f"PyTorch {t['version']}, CUDA build: {t['cuda_build'] or 'none'}, cuDNN: {t['cudnn'] or 'none'}")
    cpu = report["cpu"]
    con.print(
        f"CPU: {cpu['model']}, {cpu['logical_cores']} logical core(s), {cpu['usable_cores']} usable, "
        f"torch uses {cpu['torch_threads']} thread(s)"
    )
    if report["gpus"]:
        table = Table(title="GPUs")
        for col in ("index", "name", "compute capability", "memory (free / total)", "multiprocessors"):
            table.add_column(col)
        for g in report["gpus"]:
            table.add_row(
                str(g["index"]),
                g["name"],
                g["compute_capability"],
                f"{gib(g['free_memory_bytes'])} / {gib(g['total_memory_bytes'])}",
                str(g["multiprocessors"]),
            )
        con.print(table)
    else:
        con.print(f"GPUs: none ({report['cuda']['reason']})")
    table = Table(title="Optional libraries")
    for col in ("library", "version", "status", "detail"):
        table.add_column(col)
    for lib in report["libraries"]:
        style = "green" if lib["works"] else "dim"
        table.add_row(lib["name"], lib["version"] or "-", f"[{style}]{lib['status']}[/{style}]", lib["detail"])
    con.print(table)
