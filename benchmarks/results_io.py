"""What every benchmark script records about the machine, and how it writes its results (JSON and Markdown)."""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from devicepipe.bench.results import source_commit
from devicepipe.core.device import device_report

#: Where the scripts write their results by default (committed).
RESULTS = Path(__file__).resolve().parent / "results"


def parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser described by the script's first docstring line, with ``--out DIR``."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--out", type=Path, default=RESULTS, help="folder for NAME.json and NAME.md")
    return p


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table's lines."""
    return [f"| {' | '.join(header)} |", "|" + "---|" * len(header), *(f"| {' | '.join(map(str, r))} |" for r in rows)]


def heading(title: str, result: dict[str, Any], *about: str, minutes: bool = False) -> str:
    """A results page's first line: ``# TITLE (date, commit C, ABOUT...)`` from :func:`machine`'s
    ``result`` (``minutes``: the date with the time of day to the minute)."""
    when = result["date"][: 16 if minutes else 10]
    commit = "commit " + str(result["commit"])
    return f"# {title} ({', '.join([when, commit, *about])})"


def machine() -> dict[str, Any]:
    """Date, commit, platform, CPU model, usable cores, torch version and its thread count."""
    cpu = device_report()["cpu"]
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": source_commit(RESULTS.parent),  # "-dirty" where tracked files differ from it
        "platform": platform.platform(),
        "cpu": cpu["model"],
        "usable_cores": cpu["usable_cores"],
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def write_table_page(
    out: Path,
    name: str,
    result: dict[str, Any],
    title: str,
    header: list[str],
    rows: list[list[Any]],
    *about: str,
    note: str = "",
) -> None:
    """:func:`write_results` with a page of one table: its heading (:func:`heading`, the CPU and
    ``about``), ``note`` and the table of ``header`` and ``rows``."""
    lines = [heading(title, result, result["cpu"], *about), "", *([note, ""] if note else [])]
    write_results(Path(out), name, result, "\n".join([*lines, *table(header, rows), ""]))


def write_results(out: Path, name: str, result: dict[str, Any], markdown: str) -> None:
    """``out/NAME.json`` and ``out/NAME.md``; the Markdown is printed too."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / f"{name}.md").write_text(markdown, encoding="utf-8")
    print(markdown)


# Runs ``devicepipe ARGS`` in this child and, at its exit, writes the child's own peak resident
# memory: VmHWM of its memory after exec. (getrusage's ru_maxrss is not that: Linux keeps it across
# exec, so it starts at the resident size of the process that spawned the child.)
_MEASURED = (
    "import atexit, runpy, sys\n"
    "out = sys.argv.pop(1)\n"
    "def hwm():\n"
    "    kb = next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
    "    open(out, 'w').write(kb)\n"
    "atexit.register(hwm)\n"
    "sys.argv[0] = 'devicepipe'\n"
    "runpy.run_module('devicepipe', run_name='__main__')\n"
)


def run_measured(args: list[str], env: dict[str, str] | None = None) -> tuple[float, int, subprocess.CompletedProcess]:
    """``devicepipe ARGS`` in a process of its own (``env``: its environment, default this
    one's): wall seconds, its peak resident bytes (-1 when it could not be read: the command
    failed before its exit), and the finished process."""
    with tempfile.NamedTemporaryFile(suffix=".hwm") as fh:
        started = time.perf_counter()
        command = [sys.executable, "-c", _MEASURED, fh.name, *args]
        proc = subprocess.run(command, capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - started
        text = Path(fh.name).read_text().strip()
    return elapsed, int(text) * 1024 if text else -1, proc
