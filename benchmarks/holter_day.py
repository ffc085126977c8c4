"""A Holter day: ``devicepipe beats`` on a simulated 22-h ECG against sleepecg's detection alone.

The recording: 80,000 s at 250 Hz (20 M samples), 1 % ventricular and 1 % atrial premature
beats, simulated once (``devicepipe simulate ecg``, seed 3) as ``.npy``. Each repeat, in rotated
order, each in a process of its own:

- ``ours``: ``devicepipe beats DAY --sampling-rate 250 --out ...`` with its defaults (classes,
  Holter events, HRV, figures, report), at one thread (``DEVICEPIPE_THREADS=1``): wall seconds
  from start to exit (the import of torch included), peak resident memory, and the stages'
  seconds from its ``summary.json``;
- ``base`` (with ``--base-src DIR``, a checkout's ``src``): the same command from that code, for
  a before-and-after in one run;
- ``sleepecg``: ``sleepecg.detect_heartbeats`` on the same array, one thread: the call's
  seconds (the target's "detection alone": the process's first call, which writes fresh
  memory), a second call's on the same array in the same process, and the whole process's
  wall time.

Ratios per repeat (ours' wall / sleepecg's first call, and / its second; base's wall / ours')
with the median's 95 % bootstrap interval. Every side's beats are checked equal to the first run's.

    python benchmarks/holter_day.py [--repeats 7] [--base-src DIR] [--out DIR]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from results_io import machine, parser, run_measured, table, write_results  # beside this script

from devicepipe.bench.results import source_commit

_SLEEPECG = (
    "import sys, time, numpy as np, sleepecg\n"
    "x = np.load(sys.argv[1]).astype(np.float64)\n"
    "started = time.perf_counter()\n"
    "peaks = sleepecg.detect_heartbeats(x, 250.0)\n"
    "took = time.perf_counter() - started\n"
    "started = time.perf_counter()\n"
    "sleepecg.detect_heartbeats(x, 250.0)\n"
    "again = time.perf_counter() - started\n"
    "np.save(sys.argv[2], peaks)\n"
    "print(took, again)\n"
)
ONE_THREAD = {"DEVICEPIPE_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


def _interval(ratios: list[float]) -> list[float]:
    values = np.asarray(ratios)
    rng = np.random.default_rng(0)
    boot = np.median(values[rng.integers(0, values.size, (2000, values.size))], axis=1)
    return [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))]


def _ours(day: Path, out: Path, src: Path | None) -> dict[str, Any]:
    env = {**os.environ, **ONE_THREAD}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    wall, peak, proc = run_measured(["beats", str(day), "--sampling-rate", "250", "--out", str(out)], env)
    if proc.returncode != 0:
        raise SystemExit(f"devicepipe beats failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    summary = json.loads((out / "summary.json").read_text())
    peaks = pq.read_table(out / "beats.parquet", columns=["peak"])["peak"].to_numpy()
    return {"wall_s": wall, "peak_rss_mib": peak / 2**20, "seconds": summary["seconds"], "peaks": peaks}


def _sleepecg(day: Path, work: Path) -> dict[str, Any]:
    env = {**os.environ, **ONE_THREAD}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _SLEEPECG, str(day), str(work / "sleepecg.npy")], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"sleepecg failed: {proc.stderr.strip()[-800:]}")
    first, second = (float(v) for v in proc.stdout.split())
    return {"wall_s": wall, "call_s": first, "second_call_s": second, "peaks": np.load(work / "sleepecg.npy")}


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__)
    options.add_argument("--repeats", type=int, default=7)
    options.add_argument("--base-src", type=Path, default=None, help="another checkout's src/, run beside ours")
    args = options.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        day = work / "day.npy"
        made = subprocess.run(
            [sys.executable, "-m", "devicepipe", "simulate", "ecg", "--duration", "80000s", "--sampling-rate", "250"]
            + ["--ectopic-rate", "0.01", "--atrial-rate", "0.01", "--seed", "3", "--out", str(day)],
            capture_output=True,
            text=True,
        )
        if made.returncode != 0:
            raise SystemExit(made.stderr)
        sides = ["ours", "sleepecg"] + (["base"] if args.base_src else [])
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        first: dict[str, np.ndarray] = {}
        for r in range(args.repeats + 1):  # the first round warms the page cache and is not kept
            for side in sides[r % len(sides) :] + sides[: r % len(sides)]:
                if side == "sleepecg":
                    got = _sleepecg(day, work)
                else:
                    got = _ours(day, work / f"{side}{r}", args.base_src if side == "base" else None)
                peaks = got.pop("peaks")
                if side not in first:
                    first[side] = peaks
                elif not np.array_equal(first[side], peaks):
                    raise SystemExit(f"{side}: other beats than its first run")
                if r:
                    runs[side].append(got)
                    print(side, {k: round(v, 3) for k, v in got.items() if isinstance(v, float)}, flush=True)
        if "base" in first and not np.array_equal(first["base"], first["ours"]):
            raise SystemExit("base and ours found other beats")
    ours_wall = [x["wall_s"] for x in runs["ours"]]
    sleep_call = [x["call_s"] for x in runs["sleepecg"]]
    over = [a / b for a, b in zip(ours_wall, sleep_call, strict=True)]
    second = [a / x["second_call_s"] for a, x in zip(ours_wall, runs["sleepecg"], strict=True)]
    result: dict[str, Any] = {
        **machine(),
        "threads_env": ONE_THREAD,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
        "samples": 20_000_000,
        "sampling_rate_hz": 250.0,
        "beats_ours": int(first["ours"].size),
        "beats_sleepecg": int(first["sleepecg"].size),
        "repeats": args.repeats,
        "runs": runs,
        "ours_wall_over_sleepecg_call": {"median": float(np.median(over)), "ci95": _interval(over)},
        "ours_wall_over_sleepecg_second_call": {"median": float(np.median(second)), "ci95": _interval(second)},
        "target": "ours' wall at most 5x sleepecg's detection alone",
    }
    rows = []
    for side in sides:
        walls = [x["wall_s"] for x in runs[side]]
        stages = runs[side][0].get("seconds") or {}
        med = {k: float(np.median([x["seconds"][k] for x in runs[side]])) for k in stages}
        rows.append(
            [
                side,
                f"{np.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f})",
                (
                    f"{np.median([x['call_s'] for x in runs[side]]):.2f} first, "
                    f"{np.median([x['second_call_s'] for x in runs[side]]):.2f} second"
                    if side == "sleepecg"
                    else "-"
                ),
                f"{np.median([x['peak_rss_mib'] for x in runs[side]]):.0f}" if side != "sleepecg" else "-",
                ", ".join(f"{k} {v:.2f}" for k, v in med.items()) or "-",
            ]
        )
    if "base" in runs:
        gain = [b["wall_s"] / a["wall_s"] for a, b in zip(runs["ours"], runs["base"], strict=True)]
        result["base_src"] = str(args.base_src)
        result["base_commit"] = source_commit(args.base_src) or "unknown"
        result["base_wall_over_ours"] = {"median": float(np.median(gain)), "ci95": _interval(gain)}
    ci = result["ours_wall_over_sleepecg_call"]
    lines = [
        f"# A Holter day: `beats` on 20 M samples against sleepecg's detection ({result['date'][:10]},"
        f" commit {result['commit']}, {result['cpu']})",
        "",
        f"One thread each ({', '.join(f'{k}={v}' for k, v in ONE_THREAD.items())}), OMP_WAIT_POLICY"
        f" {result['omp_wait_policy']}; {args.repeats} rounds in rotated order after one not kept; each side in a"
        " process of its own. Produced by `python benchmarks/holter_day.py`; data in `holter_day.json`.",
        "",
        *table(["side", "wall s, median (min-max)", "detection call s, median", "peak MiB", "stages, median s"], rows),
        "",
        f"Ours' wall over sleepecg's call: median {ci['median']:.2f}x, 95 % interval"
        f" {ci['ci95'][0]:.2f}-{ci['ci95'][1]:.2f}x (target: at most 5x). Over its second call on the same array:"
        f" median {result['ours_wall_over_sleepecg_second_call']['median']:.2f}x, 95 % interval"
        f" {result['ours_wall_over_sleepecg_second_call']['ci95'][0]:.2f}"
        f"-{result['ours_wall_over_sleepecg_second_call']['ci95'][1]:.2f}x.",
    ]
    if "base" in runs:
        b = result["base_wall_over_ours"]
        lines.append(
            f"Base ({args.base_src}, commit {result['base_commit']}) wall over ours: median {b['median']:.2f}x,"
            " 95 % interval"
            f" {b['ci95'][0]:.2f}-{b['ci95'][1]:.2f}x."
        )
    write_results(args.out, "holter_day", result, "\n".join([*lines, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
