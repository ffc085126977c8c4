"""The headline table that opens BENCHMARKS.md: each claim, its figure and the lower bound of its
95 % interval, its target and whether it is met, the run that measured it (date, commit, machine),
and whether the code it measures has changed since that commit (then the figure is stale until
the benchmark is run again).

A claim reads its figure from one committed result file (:attr:`Claim.source`); the code it
measures is a list of paths (:attr:`Claim.code`), and "changed since" is git's answer to whether
those paths differ between the result's commit and the working tree. Rendered by
``python benchmarks/benchmarks_doc.py`` between ``<!-- table headline: benchmarks/headline.py -->``
and ``<!-- end table -->``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: The code of each kind of claim: a change under these paths makes the claim's figure stale.
DETECTION = (
    "src/devicepipe/ecg/ricker.py",
    "src/devicepipe/ecg/compiled.py",
    "src/devicepipe/ecg/compiled_loops.py",
    "src/devicepipe/ecg/peaks.py",
    "src/devicepipe/ecg/inputs.py",
)
READING = ("src/devicepipe/io",)
CLASSES = ("src/devicepipe/ecg", "src/devicepipe/heart/holter.py")
EVERYTHING = ("src/devicepipe",)

#: A figure and the lower bound of its 95 % interval (None: a single measurement or a count).
Figure = tuple[float, float | None]


@dataclass(frozen=True)
class Claim:
    """One row of the headline table.

    ``figure`` reads ``(figure, lower bound)`` from the parsed result file ``source``; ``unit`` is
    written after both (``"x"``, ``" s"``, ``" %"``, ...); ``target`` is ``(">=" or "<=", value)``
    in the same unit, met where the lower bound (a ``">="`` target; else the figure) passes it;
    ``code`` are the paths the figure measures."""

    claim: str
    source: str
    figure: Callable[[dict[str, Any]], Figure]
    unit: str
    target: tuple[str, float]
    code: tuple[str, ...]
    digits: int = 2


def _peer_row(name: str) -> Callable[[dict[str, Any]], Figure]:
    """sleepecg's time over ours on the ``peers_fair`` row ``name`` at one thread each."""

    def read(result: dict[str, Any]) -> Figure:
        row = next(r for r in result["rows"] if r["input"] == name and not r["same_cores"])
        return row["ratio_median"], row["ratio_ci95"][0]

    return read


def _ratio_versus(versus: str) -> Callable[[dict[str, Any]], Figure]:
    def read(result: dict[str, Any]) -> Figure:
        ratio = next(r for r in result["ratios"] if r["versus"] == versus)
        return ratio["median"], ratio["ci95"][0]

    return read


def _loaded_over_idle(size: str) -> Callable[[dict[str, Any]], Figure]:
    """How much slower a call of ``size`` samples beside two busy processes is than idle; its upper
    bound is the one a ``<=`` target is read against, so it is given as the bound."""

    def read(result: dict[str, Any]) -> Figure:
        ratio = result["loaded_over_idle"]["seconds_policy"][size]
        return ratio["ratio"], ratio["ci95"][1]

    return read


def _gross(row: str, key: str) -> Callable[[dict[str, Any]], Figure]:
    return lambda result: (100.0 * result["gross"][row][key], None)


def _slowest_demo(result: dict[str, Any]) -> Figure:
    return max(d["wall_s"] for d in result["demo"]), None


def _dask_idle(result: dict[str, Any]) -> Figure:
    idle = next(s for s in result["summary"] if s["condition"] == "idle")["loop_over_dask"]
    return idle["median"], idle["ci95"][0]


def _gpu_detection(result: dict[str, Any]) -> Figure:
    stage = next(s for s in result["stages"] if s["stage"] == "detect" and s["device"].startswith("cuda"))
    return stage["samples_per_s"] / 1e9, None


def _holter_day(result: dict[str, Any]) -> Figure:
    # a ratio whose target is a ceiling: its upper bound is the one that must stay under it
    ratio = result["ours_wall_over_sleepecg_call"]
    return ratio["median"], ratio["ci95"][1]


CLAIMS = (
    Claim(
        "One 10-s 500 Hz ECG a call (25 CPSC 2019 records): sleepecg's time over ours, 1 thread each",
        "benchmarks/results/peers_fair.json",
        _peer_row("CPSC 2019, 10 s at 500 Hz (a call per record)"),
        "x",
        (">=", 1.0),
        DETECTION,
    ),
    Claim(
        "100,000 simulated samples a call: sleepecg's time over ours, 1 thread each",
        "benchmarks/results/peers_fair.json",
        _peer_row("simulated, 100,000 samples"),
        "x",
        (">=", 1.5),
        DETECTION,
    ),
    Claim(
        "20,000,000 simulated samples a call: sleepecg's time over ours, 1 thread each",
        "benchmarks/results/peers_fair.json",
        _peer_row("simulated, 20,000,000 samples"),
        "x",
        (">=", 2.5),
        DETECTION,
    ),
    Claim(
        "1,000 10-s WFDB records, files to peaks: an `np.fromfile` reader + sleepecg loop's time over ours",
        "benchmarks/results/folder_of_short_records_one_lead_1000_records.json",
        _ratio_versus("np.fromfile reader + sleepecg loop"),
        "x",
        (">=", 3.0),
        DETECTION + READING,
    ),
    Claim(
        "A 100,000-sample call beside two busy processes: its time over idle (bound: the upper one)",
        "benchmarks/results/detection_threads.json",
        _loaded_over_idle("100,000"),
        "x",
        ("<=", 2.0),
        DETECTION + ("src/devicepipe/core",),
    ),
    Claim(
        "A simulated 22-h ECG: `devicepipe beats` over sleepecg's detection alone (bound: the upper one)",
        "benchmarks/results/holter_day.json",
        _holter_day,
        "x",
        ("<=", 5.0),
        EVERYTHING,
    ),
    Claim(
        "`devicepipe demo` from the README's command (the slowest of its runs)",
        "benchmarks/results/readme_times.json",
        _slowest_demo,
        " s",
        ("<=", 30.0),
        EVERYTHING,
        digits=1,
    ),
    Claim(
        "`devicepipe ecg` on MIT-BIH 100",
        "benchmarks/results/time_to_result.json",
        lambda result: (result["cases"]["ecg MIT-BIH 100"]["wall_s"], None),
        " s",
        ("<=", 20.0),
        EVERYTHING,
        digits=1,
    ),
    Claim(
        "V sensitivity over MIT-BIH 105, 106, 200",
        "benchmarks/results/ec57.json",
        _gross("V (mitdb_v 105, 106, 200)", "sensitivity"),
        " %",
        (">=", 95.0),
        CLASSES,
        digits=1,
    ),
    Claim(
        "V positive predictivity over MIT-BIH 105, 106, 200",
        "benchmarks/results/ec57.json",
        _gross("V (mitdb_v 105, 106, 200)", "ppv"),
        " %",
        (">=", 95.0),
        CLASSES,
        digits=1,
    ),
    Claim(
        "S positive predictivity on CPSC 2021 (target at S sensitivity >= 60 %)",
        "benchmarks/results/ec57.json",
        _gross("S (cpsc2021)", "ppv"),
        " %",
        (">=", 80.0),
        CLASSES,
        digits=1,
    ),
    Claim(
        "S sensitivity on CPSC 2021",
        "benchmarks/results/ec57.json",
        _gross("S (cpsc2021)", "sensitivity"),
        " %",
        (">=", 60.0),
        CLASSES,
        digits=1,
    ),
    Claim(
        "Beats inside AF found in AF (CPSC 2021)",
        "benchmarks/results/ec57.json",
        _gross("AF (cpsc2021 beats; kinds over every record)", "sensitivity"),
        " %",
        (">=", 95.0),
        CLASSES,
        digits=1,
    ),
    Claim(
        "Folder of recordings: the loop's time over two Dask workers, idle",
        "benchmarks/results/dask_gain.json",
        _dask_idle,
        "x",
        (">=", 1.6),
        EVERYTHING,
    ),
    Claim(
        "Detection on an NVIDIA H200, data on the device (G samples/s)",
        "benchmarks/results/cuda/bench.json",
        _gpu_detection,
        " G samples/s",
        (">=", 2.0),
        DETECTION,
    ),
)


def changed_since(commit: str, paths: tuple[str, ...], root: Path = ROOT) -> bool | None:
    """Whether ``paths`` differ between ``commit`` and the working tree (None: git cannot say, as
    in a checkout without that commit's history)."""
    try:
        done = subprocess.run(
            ["git", "diff", "--quiet", commit.removesuffix("-dirty"), "--", *paths],
            cwd=root,
            capture_output=True,
            check=False,
        )
    except OSError:
        return None
    return {0: False, 1: True}.get(done.returncode)


def _machine(result: dict[str, Any]) -> str:
    if "cpu" in result:
        return f"{result['cpu']}, {result['usable_cores']} cores"
    gpus = result["machine"]["gpus"]
    return f"{gpus[0]['name']}, {result['machine']['cpu']['model']}"


def _met(claim: Claim, figure: float, bound: float | None) -> bool:
    op, value = claim.target
    read = figure if bound is None else bound
    return read >= value if op == ">=" else read <= value


def rows(
    changed: Callable[[str, tuple[str, ...]], bool | None] = changed_since,
    root: Path = ROOT,
    previous: list[str] | None = None,
) -> list[list[str]]:
    """The table's rows: claim, figure, bound, target, met, measured (date, commit, machine), and
    whether the claim's code has changed since (``changed``). Where ``changed`` cannot say (a
    checkout without the history), that cell is kept as the table ``previous`` (its lines) has it,
    else "unknown"."""
    before = {cells[0]: cells[-1] for cells in map(_cells, previous or []) if len(cells) == len(HEADER)}
    out = []
    for c in CLAIMS:
        result = json.loads((root / c.source).read_text(encoding="utf-8"))
        figure, bound = c.figure(result)
        fmt = f"{{:.{c.digits}f}}{c.unit}"
        stale = changed(result["commit"], c.code)
        out.append(
            [
                c.claim,
                fmt.format(figure),
                "-" if bound is None else fmt.format(bound),
                f"{'≥' if c.target[0] == '>=' else '≤'} {fmt.format(c.target[1])}",
                "yes" if _met(c, figure, bound) else "**no**",
                f"{result['date'][:10]}, `{result['commit']}`, {_machine(result)} (`{c.source}`)",
                before.get(c.claim, "unknown") if stale is None else ("yes: stale" if stale else "no"),
            ]
        )
    return out


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table's line."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


HEADER = ["claim", "figure", "95 % bound", "target", "met", "measured", "code changed since"]
