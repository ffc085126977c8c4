"""What a loaded machine leaves one thread: the same fixed computation idle, beside one busy process
and beside two.

    python benchmarks/fair_share.py [--rounds 6] [--repeats 3]        # about a minute on 2 cores

The computation is one thread's: NumPy matrix products at one BLAS thread and a Python loop,
about half a second. The busy processes spin (``while True: pass``), as in
``detection_threads.py``'s load. Each round measures the three loads in a rotated order,
``--repeats`` calls each after the load has started. Beside one busy process on two cores the
thread should keep its core (a slowdown there means the two cores share one, as hyperthreads
do); beside two, the scheduler shares two cores among three threads, two thirds of a core each
(1.5x) at worst. Results: ``benchmarks/results/fair_share.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # (before NumPy's BLAS starts its threads)
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from results_io import machine, parser, write_table_page  # noqa: E402

LOADS = (0, 1, 2)


def work(a: np.ndarray) -> float:
    """Seconds for a fixed computation on one thread."""
    started = time.perf_counter()
    for _ in range(150):
        a @ a
    x = 0
    for i in range(1_500_000):
        x += i
    return time.perf_counter() - started


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=6)
    options.add_argument("--repeats", type=int, default=3)
    args = options.parse_args()
    a = np.random.default_rng(0).normal(size=(400, 400))
    work(a)  # warm-up
    seconds: dict[int, list[float]] = {n: [] for n in LOADS}
    for r in range(args.rounds):
        for n in LOADS[r % 3 :] + LOADS[: r % 3]:  # rotated order
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
            try:
                time.sleep(0.5)  # (the load running before the first call)
                seconds[n] += [work(a) for _ in range(args.repeats)]
            finally:
                for b in busy:
                    b.kill()
                    b.wait()
            time.sleep(0.3)
    idle = statistics.median(seconds[0])
    result = {
        **machine(),
        "logical_cores": os.cpu_count(),
        "rounds": args.rounds,
        "repeats": args.repeats,
        "median_s": {f"{n} busy": statistics.median(seconds[n]) for n in LOADS},
        "slowdown_vs_idle": {f"{n} busy": statistics.median(seconds[n]) / idle for n in LOADS},
        "seconds": {f"{n} busy": seconds[n] for n in LOADS},
    }
    rows = [
        [f"{n} busy process{'es' if n != 1 else ''}", f"{1000 * result['median_s'][f'{n} busy']:.1f}",
         f"{result['slowdown_vs_idle'][f'{n} busy']:.2f}x", len(seconds[n])]
        for n in LOADS
    ]  # fmt: skip
    write_table_page(
        args.out, "fair_share", result, "One thread's computation beside busy processes",
        ["load", "median (ms)", "slowdown against idle", "calls"], rows, "1 thread",
        note=f"{os.cpu_count()} logical cores; {args.rounds} rounds, the loads in a rotated order, "
        f"{args.repeats} calls each.",
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
