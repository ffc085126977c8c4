"""What every benchmark script records about the machine, and how it writes its results (JSON and Markdown)."""

from __future__ import annotations

import argparse
import datetime
import json
import platform
from pathlib import Path
from typing import Any

import torch

from devicepipe.device import device_report

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


def machine() -> dict[str, Any]:
    """Date, platform, CPU model, usable cores, torch version and its thread count."""
    cpu = device_report()["cpu"]
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu": cpu["model"],
        "usable_cores": cpu["usable_cores"],
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def write_results(out: Path, name: str, result: dict[str, Any], markdown: str) -> None:
    """``out/NAME.json`` and ``out/NAME.md``; the Markdown is printed too."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / f"{name}.md").write_text(markdown, encoding="utf-8")
    print(markdown)
