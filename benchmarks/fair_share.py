"""What a loaded machine leaves one thread: the same fixed computations idle, beside one busy process
and beside two.

    python benchmarks/fair_share.py [--rounds 6] [--repeats 3]        # about two minutes on 2 cores

Two computations, each one thread's: NumPy matrix products at one BLAS thread and a Python loop
(about half a second, its data in the caches), and ``ecg_peaks`` on 20,000,000 simulated samples
at 250 Hz at one torch thread (about a fifth of a second, streaming arrays of 80 MB through
memory). Each call's wall time and the CPU time the process got for it (user and kernel): their
ratio is the share of a core the call had, and CPU time that grows under load is the work itself
slowed (caches refilled after the scheduler's switches), not the share. The busy processes spin
(``while True: pass``), as in ``detection_threads.py``'s load. Each round measures the three
loads in a rotated order, ``--repeats`` calls each after the load has started. Beside one busy
process on two cores the thread should keep its core (a slowdown there means the two cores
share one, as hyperthreads do); beside two, the scheduler shares two cores among three threads,
two thirds of a core each (1.5x) when it shares them evenly. Results: ``benchmarks/results/fair_share.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # (before NumPy's BLAS starts its threads)
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from results_io import machine, parser, write_table_page  # noqa: E402

import devicepipe as dp  # noqa: E402
from devicepipe.ecg import ecg_peaks  # noqa: E402

LOADS = (0, 1, 2)
#: Samples of the detection call (as the largest of ``detection_threads.py``), at 250 Hz.
DETECTION_SAMPLES = 20_000_000


def work(a: np.ndarray) -> float:
    """Seconds for a fixed computation on one thread."""
    started = time.perf_counter()
    for _ in range(150):
        a @ a
    x = 0
    for i in range(1_500_000):
        x += i
    return time.perf_counter() - started


def timed(call: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds of ``call()`` and the process's CPU seconds (user and kernel) during it."""
    cpu, started = time.process_time(), time.perf_counter()
    call()
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=6)
    options.add_argument("--repeats", type=int, default=3)
    args = options.parse_args()
    torch.set_num_threads(1)
    a = np.random.default_rng(0).normal(size=(400, 400))
    x = dp.simulate_ecg(DETECTION_SAMPLES / 250.0, 250.0, seed=0).signal
    calls = {"NumPy and a Python loop": lambda: work(a), "detection, 20,000,000 samples": lambda: ecg_peaks(x, 250.0)}
    for call in calls.values():
        call()  # warm-up
    wall: dict[str, dict[int, list[float]]] = {c: {n: [] for n in LOADS} for c in calls}
    cpu: dict[str, dict[int, list[float]]] = {c: {n: [] for n in LOADS} for c in calls}
    for r in range(args.rounds):
        for n in LOADS[r % 3 :] + LOADS[: r % 3]:  # rotated order
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
            try:
                time.sleep(0.5)  # (the load running before the first call)
                for _ in range(args.repeats):
                    for name in calls if r % 2 == 0 else reversed(calls):  # alternated
                        w, c = timed(calls[name])
                        wall[name][n].append(w)
                        cpu[name][n].append(c)
            finally:
                for b in busy:
                    b.kill()
                    b.wait()
            time.sleep(0.3)
    med = statistics.median
    per_call = {
        name: {
            f"{n} busy": {
                "median_s": med(wall[name][n]),
                "slowdown_vs_idle": med(wall[name][n]) / med(wall[name][0]),
                "cpu_median_s": med(cpu[name][n]),
                "cpu_vs_idle": med(cpu[name][n]) / med(cpu[name][0]),
                "core_share": med(c / w for c, w in zip(cpu[name][n], wall[name][n], strict=True)),
                "wall_s": wall[name][n],
                "cpu_s": cpu[name][n],
            }
            for n in LOADS
        }
        for name in calls
    }
    first = per_call["NumPy and a Python loop"]
    result = {
        **machine(),
        "logical_cores": os.cpu_count(),
        "rounds": args.rounds,
        "repeats": args.repeats,
        # (the first computation's figures under the names of the run before)
        "median_s": {k: v["median_s"] for k, v in first.items()},
        "slowdown_vs_idle": {k: v["slowdown_vs_idle"] for k, v in first.items()},
        "calls": per_call,
    }
    rows = [
        [name, f"{n} busy process{'es' if n != 1 else ''}", f"{1000 * v['median_s']:.1f}",
         f"{v['slowdown_vs_idle']:.2f}x", f"{1000 * v['cpu_median_s']:.1f}", f"{v['cpu_vs_idle']:.2f}x",
         f"{v['core_share']:.2f}", len(v["wall_s"])]
        for name, loads in per_call.items()
        for n, v in ((int(k.split()[0]), v) for k, v in loads.items())
    ]  # fmt: skip
    write_table_page(
        args.out, "fair_share", result, "One thread's computations beside busy processes",
        ["computation", "load", "median (ms)", "slowdown against idle", "CPU time (ms)", "CPU time against idle",
         "share of a core", "calls"], rows, "1 thread", "OMP_WAIT_POLICY=PASSIVE",
        note=f"{os.cpu_count()} logical cores; {args.rounds} rounds, the loads in a rotated order, "
        f"{args.repeats} calls of each computation, alternated; CPU time is the process's, user and kernel.",
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
