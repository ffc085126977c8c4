"""Dask's gain on a folder, where it holds: wall and CPU time per recording, idle and under load.

    python benchmarks/dask_gain.py [--recordings 240] [--rounds 6]     # about 12 min on 2 cores

``devicepipe beats FOLDER --no-figures`` as a plain loop (one process, one torch thread) and on
Dask with two workers (one thread each), on the folder of ``datasets_and_long.py`` (simulated
recordings of 10 s to 30 min at 250, 360 and 500 Hz, and every shared real record). Each round
runs both, in an order drawn at random (seeded) for that round, so that neither side always
comes first; ``os.sync()`` before every run. Two conditions, interleaved round by round: the
machine otherwise idle, and under a controlled load of two busy processes (each a Python loop
spinning on one core) started before the round and stopped after it.

Per run: wall seconds, and CPU seconds of the command and every process it started (user +
system, read from /proc every 50 ms while it runs, since Dask's worker processes are not waited
for by the command and ``getrusage`` never sees them; ``getrusage``'s figure is kept beside it),
per recording. Per condition: the loop's
wall time over Dask's within each round (median and bootstrap 95 % interval; quote the lower
bound), and the first round against the rest, for the first-round effect.

Results: ``benchmarks/results/dask_gain.{json,md}``.
"""

from __future__ import annotations

import compileall
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datasets_and_long import make_folder
from results_io import heading, machine, parser, table, write_results

import devicepipe
from devicepipe.bench.paired import _bootstrap_ci

SETTINGS = {"loop, 1 thread": ["--workers", "0"], "dask, 2 workers": ["--workers", "2"]}
CONDITIONS = ["idle", "two busy processes"]
SPIN = "while True: pass"


#: How often the processes a command started are read from /proc, in seconds.
SAMPLE_S = 0.05
_TICK = os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds (user + system) so far of ``root`` and every process under it, by pid, from /proc."""
    parent, cpu = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    mine, grown = {root}, True
    while grown:
        more = {pid for pid, ppid in parent.items() if ppid in mine} - mine
        mine |= more
        grown = bool(more)
    return {pid: cpu[pid] for pid in mine if pid in cpu}


def run_once(folder: Path, out: Path, args: list[str], expected: int) -> dict[str, float]:
    """One ``beats`` command: wall seconds, and CPU seconds of it and every process it started,
    read from /proc every :data:`SAMPLE_S` (each process's last reading kept: its last
    ``SAMPLE_S`` are missed) and, for the processes that were waited for, from ``getrusage``."""
    env = dict(os.environ, DEVICEPIPE_THREADS="1", OMP_NUM_THREADS="1")
    os.sync()
    cpu0, started = _children_cpu(), time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "devicepipe", "beats", str(folder), "--out", str(out), "--no-figures", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen: dict[int, float] = {}
    while proc.poll() is None:
        seen |= _tree_cpu(proc.pid)
        time.sleep(SAMPLE_S)
    wall, waited = time.perf_counter() - started, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"beats {' '.join(args)} failed ({proc.returncode})")
    index = pq.read_table(out / "index.parquet")
    assert index.num_rows == expected and set(index.column("status").to_pylist()) == {"ok"}
    shutil.rmtree(out)
    return {"wall_s": round(wall, 3), "cpu_s": round(sum(seen.values()), 3), "cpu_s_waited_for": round(waited, 3)}


def summary(runs: list[dict[str, Any]], total: int) -> list[dict[str, Any]]:
    """Per condition: medians per setting, the paired ratio of wall times, and round 1 against the rest."""
    out = []
    for condition in CONDITIONS:
        mine = [r for r in runs if r["condition"] == condition]
        row: dict[str, Any] = {"condition": condition}
        for name in SETTINGS:
            side = [r for r in mine if r["setting"] == name]
            walls = [r["wall_s"] for r in side]
            row[name] = {
                "wall_s_median": round(statistics.median(walls), 2),
                "cpu_s_per_recording": round(statistics.median(r["cpu_s"] for r in side) / total, 4),
                "wall_s_per_recording": round(statistics.median(walls) / total, 4),
                "first_round_wall_s": side[0]["wall_s"],
                "later_rounds_wall_s_median": round(statistics.median(walls[1:]), 2) if len(walls) > 1 else None,
            }
        rounds = sorted({r["round"] for r in mine})
        ratios = []
        for k in rounds:
            walls = {r["setting"]: r["wall_s"] for r in mine if r["round"] == k}
            ratios.append(walls["loop, 1 thread"] / walls["dask, 2 workers"])
        low, high = _bootstrap_ci(ratios)
        row["loop_over_dask"] = {"median": round(statistics.median(ratios), 3), "ci95": [round(low, 3), round(high, 3)]}
        row["ratios"] = [round(v, 3) for v in ratios]
        out.append(row)
    return out


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--recordings", type=int, default=240)
    options.add_argument("--rounds", type=int, default=6)
    args = options.parse_args()
    compileall.compile_dir(str(Path(devicepipe.__file__).parent), quiet=1)  # as pip does at install
    order = random.Random(0)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "folder"
        made = make_folder(folder, args.recordings)
        total = made["simulated"] + made["real"]
        for k in range(args.rounds):
            for condition in CONDITIONS:
                busy = []
                if condition != "idle":
                    busy = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(2)]
                    time.sleep(1.0)
                try:
                    names = list(SETTINGS)
                    order.shuffle(names)
                    for position, name in enumerate(names):
                        got = run_once(folder, Path(tmp) / f"out-{k}-{name[:4]}", SETTINGS[name], total)
                        runs.append({"round": k, "condition": condition, "setting": name, "position": position} | got)
                finally:
                    for p in busy:
                        p.kill()
                        p.wait()
    rows = summary(runs, total)
    result = {**machine(), "recordings": made, "runs": runs, "summary": rows}
    lines = [
        heading(
            f"Dask's gain on a folder of {total} recordings, idle and under load",
            result,
            result["cpu"],
            f"{result['usable_cores']} cores",
        ),
        "",
        f"`devicepipe beats --no-figures`, {args.rounds} rounds, the two settings in a random order each round. "
        "Loop / Dask: the loop's wall time over Dask's within a round, median and bootstrap 95 % interval. "
        "CPU: user + system seconds of the command and every process it started, per recording.",
        "",
        *table(
            [
                "condition",
                "loop wall (s)",
                "Dask wall (s)",
                "loop / Dask",
                "95 % interval",
                "loop CPU s per recording",
                "Dask CPU s per recording",
                "first round, loop / Dask (s)",
            ],
            [
                [
                    r["condition"],
                    r["loop, 1 thread"]["wall_s_median"],
                    r["dask, 2 workers"]["wall_s_median"],
                    f"{r['loop_over_dask']['median']:.2f}x",
                    f"{r['loop_over_dask']['ci95'][0]:.2f}-{r['loop_over_dask']['ci95'][1]:.2f}",
                    r["loop, 1 thread"]["cpu_s_per_recording"],
                    r["dask, 2 workers"]["cpu_s_per_recording"],
                    " / ".join(f"{r[name]['first_round_wall_s']:.1f}" for name in SETTINGS),
                ]
                for r in rows
            ],
        ),
    ]
    write_results(args.out, "dask_gain", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
