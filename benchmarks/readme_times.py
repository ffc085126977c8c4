"""The README's two set-up commands, timed as a user runs them after the install.

    python benchmarks/readme_times.py [--demos 3] [--tests 1]     # about 5 min on 2 cores

Runs ``devicepipe demo`` (the first command, after its install) ``--demos`` times, each in a
fresh process and a fresh output folder, and the README's test command (``python -m pytest -n 2
--dist loadfile`` in the repository) ``--tests`` times, and records each wall time, the demo's
epochs and the tests' counts. The README quotes these figures; run it on an otherwise idle
machine (OpenMP's wait policy passive, as the commands set it themselves).

Results: ``benchmarks/results/readme_times.{json,md}``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results_io import heading, machine, parser, table, write_results

ROOT = Path(__file__).resolve().parents[1]
DEVICEPIPE = Path(sys.executable).parent / "devicepipe"


def demo(out: Path) -> dict[str, Any]:
    """One ``devicepipe demo`` in a fresh process: wall seconds and the epochs it trained."""
    started = time.perf_counter()
    proc = subprocess.run([str(DEVICEPIPE), "demo", "--out", str(out)], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"devicepipe demo failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"wall_s": round(wall, 1), "epochs_run": (summary.get("epochs") or {}).get("run", [None])[0]}


def tests() -> dict[str, Any]:
    """The README's test command once: wall seconds and the counts pytest reports."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|skipped|failed|errors?)", last)}
    return {"wall_s": round(wall, 1), "returncode": proc.returncode, "counts": counts, "summary_line": last}


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--demos", type=int, default=3)
    options.add_argument("--tests", type=int, default=1)
    args = options.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        demos = [demo(Path(tmp) / f"demo-{i}") for i in range(args.demos)]
    runs = [tests() for _ in range(args.tests)]
    result = {**machine(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "demo": demos, "tests": runs}
    lines = [
        heading(
            "The README's set-up commands, timed",
            result,
            result["cpu"],
            f"{result['usable_cores']} cores",
            minutes=True,
        ),
        "",
        *table(
            ["command", "wall (s)", "what it did"],
            [["devicepipe demo", d["wall_s"], f"{d['epochs_run']} epochs"] for d in demos]
            + [["README test command", r["wall_s"], r["summary_line"]] for r in runs],
        ),
    ]
    write_results(args.out, "readme_times", result, "\n".join(lines) + "\n")
    return 0 if all(r["returncode"] == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
