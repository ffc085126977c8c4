"""R-peak detection at one and at two threads, idle and under load: where a second thread pays.

    python benchmarks/detection_threads.py            # under a minute on 2 cores
    python benchmarks/detection_threads.py --quick    # checks that it runs

``ecg_peaks`` on simulated ECGs at 250 Hz of 10 k to 20 M samples, and on 1,000 10-s ECGs at
500 Hz in one batched call (5 M samples), with torch at 1 and at 2 threads, interleaved in an
order rotated from one repeat to the next, ``OMP_WAIT_POLICY=PASSIVE`` (what the ``devicepipe``
command sets), the count fixed by ``DEVICEPIPE_THREADS`` (which ``ecg_peaks`` obeys over its own
choice, ``devicepipe.threads.detection_threads``). Idle, and under a controlled load: two
processes that spin on the 2 cores for the whole measurement. Per input, the ratio of the
1-thread time to the 2-thread time within each repeat, median and bootstrap 95 % interval; above
1, two threads were faster. Outputs are checked equal at both thread counts.

Results: ``benchmarks/results/detection_threads.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # before torch starts its OpenMP runtime

import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from results_io import heading, machine, parser, table, write_results  # noqa: E402

import devicepipe as dp  # noqa: E402
from devicepipe.threads import THREADS_ENV  # noqa: E402

SIZES = [10_000, 100_000, 1_000_000, 4_000_000, 20_000_000]
BATCH = "1,000 x 5,000 (batched)"


def inputs(quick: bool) -> list[tuple[str, torch.Tensor, float]]:
    """(name, signal ``(time,)`` or ``(batch, time)``, Hz) of every input."""
    sizes = SIZES[:2] if quick else SIZES
    long = dp.simulate_ecg(max(sizes) / 250.0, 250.0, seed=0).signal
    out = [(f"{n:,}", long[:n].clone(), 250.0) for n in sizes]
    rows = 50 if quick else 1000
    batch = torch.stack([dp.simulate_ecg(10.0, 500.0, seed=i, noise_mV=0.03).signal for i in range(rows)])
    return [*out, (BATCH if not quick else f"{rows} x 5,000 (batched)", batch, 500.0)]


def _timed(x: torch.Tensor, fs: float, threads: int) -> tuple[float, Any]:
    os.environ[THREADS_ENV] = str(threads)  # ecg_peaks' own choice (detection_threads) set aside
    torch.set_num_threads(threads)
    started = time.perf_counter()
    found = dp.ecg_peaks(x, fs)
    return time.perf_counter() - started, found


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list):
        return all(torch.equal(p, q) for p, q in zip(a, b, strict=True))
    return torch.equal(a, b)


def compare(x: torch.Tensor, fs: float, repeats: int) -> dict[str, Any]:
    """1 and 2 threads on one input, interleaved (rotated order), after a warm-up each."""
    _, one = _timed(x, fs, 1)
    _, two = _timed(x, fs, 2)
    if not _same(one, two):
        raise SystemExit("different peaks at 1 and 2 threads")
    times: dict[int, list[float]] = {1: [], 2: []}
    for r in range(repeats):
        for threads in (1, 2) if r % 2 == 0 else (2, 1):
            times[threads].append(_timed(x, fs, threads)[0])
    ratios = np.asarray(times[1]) / np.asarray(times[2])
    rng = np.random.default_rng(0)
    boot = np.median(ratios[rng.integers(0, ratios.size, (2000, ratios.size))], axis=1)
    return {
        "seconds_1_thread": times[1],
        "seconds_2_threads": times[2],
        "median_1_thread_s": float(np.median(times[1])),
        "median_2_threads_s": float(np.median(times[2])),
        "ratio_1_over_2": float(np.median(ratios)),
        "ratio_ci95": [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))],
    }


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    repeats = 3 if args.quick else args.repeats
    data = inputs(args.quick)
    rows: list[dict[str, Any]] = []
    for load in ("idle", "two busy processes"):
        busy = []
        if load != "idle":
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
            time.sleep(1.0)
        try:
            rows += [{"load": load, "input": name} | compare(x, fs, repeats) for name, x, fs in data]
        finally:
            for b in busy:
                b.kill()
                b.wait()
    result = {**machine(), "omp_wait_policy": os.environ["OMP_WAIT_POLICY"], "repeats": repeats, "rows": rows}
    lines = [
        heading("Detection at one and two threads", result, result["cpu"], "OMP_WAIT_POLICY=PASSIVE"),
        "",
        f"Median ms per `ecg_peaks` call, {repeats} repeats in alternating order; ratio = the 1-thread time / "
        "the 2-thread time within a repeat, median and bootstrap 95 % interval (above 1: two threads faster).",
        "",
        *table(
            ["load", "samples", "1 thread (ms)", "2 threads (ms)", "1 / 2 threads", "95 % interval"],
            [
                [r["load"], r["input"], f"{1000 * r['median_1_thread_s']:.2f}", f"{1000 * r['median_2_threads_s']:.2f}"]
                + [f"{r['ratio_1_over_2']:.2f}x", "{:.2f}-{:.2f}".format(*r["ratio_ci95"])]
                for r in rows
            ],
        ),
    ]
    write_results(args.out, "detection_threads" + ("_quick" if args.quick else ""), result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
