"""Huge pages for PyTorch's CPU tensors: what a fresh full-length tensor costs, call by call, with and without.

The `devicepipe` command sets ``THP_MEM_ALLOC_ENABLE=1`` so that PyTorch asks the kernel for
transparent huge pages for large buffers, as NumPy does. This script measures, in a fresh
process per setting, the time of each of the first calls that create an 80 MB tensor
(``torch.empty`` + ``fill_``), and of ``MinMaxScaler().fit_transform`` on 20 M samples (which
writes one such tensor), in call order: the first calls show what the kernel's page handling
costs before it settles.

    python benchmarks/huge_pages.py [--calls 12] [--rounds 5]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any

from results_io import machine, parser, table, write_results

CHILD = """
import json, time, torch
torch.set_num_threads(1)
from devicepipe.signal.scale import MinMaxScaler
x = torch.randn(20_000_000)
out = {"alloc_fill_ms": [], "fit_transform_ms": []}
for _ in range(CALLS):
    t = time.perf_counter()
    r = torch.empty(20_000_000)
    r.fill_(1.0)
    out["alloc_fill_ms"].append((time.perf_counter() - t) * 1e3)
    del r
for _ in range(CALLS):
    t = time.perf_counter()
    r = MinMaxScaler().fit_transform(x)
    out["fit_transform_ms"].append((time.perf_counter() - t) * 1e3)
    del r
print(json.dumps(out))
"""


def _kernel_setting(name: str) -> str:
    try:
        with open(f"/sys/kernel/mm/transparent_hugepage/{name}", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def run(calls: int, rounds: int) -> dict[str, Any]:
    """Per setting (huge pages off, on) and round: each call's milliseconds, in order."""
    runs: dict[str, list[dict[str, list[float]]]] = {"off": [], "on": []}
    for _ in range(rounds):
        for setting, flag in (("off", "0"), ("on", "1")):  # interleaved: one fresh process each
            env = {**os.environ, "THP_MEM_ALLOC_ENABLE": flag, "OMP_NUM_THREADS": "1"}
            code = CHILD.replace("CALLS", str(calls))
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            runs[setting].append(json.loads(proc.stdout))
    summary = {}
    for setting, rs in runs.items():
        for key in ("alloc_fill_ms", "fit_transform_ms"):
            first = [r[key][0] for r in rs]
            later = [v for r in rs for v in r[key][calls // 2 :]]
            summary[f"{key} {setting}"] = {
                "first_call_median_ms": statistics.median(first),
                "later_calls_median_ms": statistics.median(later),
                "slowest_ms": max(v for r in rs for v in r[key]),
            }
    return {
        **machine(),
        "threads": 1,
        "kernel": {"enabled": _kernel_setting("enabled"), "defrag": _kernel_setting("defrag")},
        "calls": calls,
        "rounds": rounds,
        "runs": runs,
        "summary": summary,
    }


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--calls", type=int, default=12)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    result = run(args.calls, args.rounds)
    what = {"alloc_fill_ms": "torch.empty + fill_", "fit_transform_ms": "MinMaxScaler().fit_transform"}
    rows = [
        [
            f"{what[name.split()[0]]}, huge pages {name.split()[1]}",
            f"{s['first_call_median_ms']:.1f}",
            f"{s['later_calls_median_ms']:.1f}",
            f"{s['slowest_ms']:.1f}",
        ]
        for name, s in result["summary"].items()
    ]
    lines = [
        "# Huge pages for PyTorch CPU tensors: an 80 MB tensor, call by call",
        "",
        f"{result['date']}, {result['cpu']}, {result['usable_cores']} cores, 1 thread, torch {result['torch']}; "
        f"kernel THP {result['kernel']['enabled']}, defrag {result['kernel']['defrag']}; {result['rounds']} fresh "
        f"processes per setting, {result['calls']} calls each. Produced by `python benchmarks/huge_pages.py`.",
        "",
        *table(
            ["what", "first call (ms, median)", "later half of the calls (ms, median)", "slowest (ms)"],
            rows,
        ),  # fmt: skip
    ]
    write_results(args.out, "huge_pages", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
