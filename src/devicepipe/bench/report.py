"""Run the benchmarks, write JSON + Markdown + charts, and compare two result files.

This module writes a run (:func:`write_report`); the rest lives beside it and is named here for
the command line: running the sections in :mod:`.run`, the Markdown in :mod:`.tables`, the
charts in :mod:`.charts`, reading and comparing result files in :mod:`.results`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

from devicepipe.bench.charts import charts
from devicepipe.bench.results import compare, load_result
from devicepipe.bench.run import SECTIONS, bench_devices, check_only, run_benchmarks
from devicepipe.bench.tables import achieved_cells, format_ratio, format_seconds, markdown
from devicepipe.io import atomic_path, write_json
from devicepipe.plots import save_figure
from devicepipe.report import REPORT_NAME
from devicepipe.report import write_report as write_page


def write_report(result: dict[str, Any], out: str | Path) -> dict[str, Path]:
    """Write ``bench.json``, ``bench.md``, the charts and ``report.html`` into ``out``."""
    out = Path(out)
    files = {"bench.json": write_json(result, out / "bench.json")}
    with atomic_path(out / "bench.md") as tmp:
        tmp.write_text(markdown(result), encoding="utf-8")
    files["bench.md"] = out / "bench.md"
    for name, fig in charts(result).items():
        files[name] = save_figure(fig, out / name)
    # the Markdown summary's tables as HTML (raw HTML in it is not passed through), with the charts
    tables = Markup(MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown(result)))
    subtitle = f"{result['machine']['cpu']['model']}, {result['date']}"
    files[REPORT_NAME] = write_page(out, "bench", None, files, extra_html=tables, subtitle=subtitle, warnings=[])
    return files


__all__ = [
    "SECTIONS",
    "achieved_cells",
    "bench_devices",
    "check_only",
    "compare",
    "format_ratio",
    "format_seconds",
    "load_result",
    "markdown",
    "run_benchmarks",
    "write_report",
]
