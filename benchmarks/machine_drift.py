"""Whether this machine slows over minutes of steady work: a fixed one-thread computation, again and
again, with the CPU time the hypervisor took (steal) between calls.

    python benchmarks/machine_drift.py [--minutes 4]

Each call is the same half second of NumPy matrix products at one BLAS thread and a Python loop
(``fair_share.py``'s); between calls the script reads ``/proc/stat`` for the time stolen from this
virtual machine's CPUs. A benchmark whose first round is its fastest for every setting (the
folder part of ``datasets_and_long.py``) would see the same drift here, without files or processes.
Results: ``benchmarks/results/machine_drift.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # (before NumPy's BLAS starts its threads)
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from fair_share import work  # noqa: E402
from results_io import machine, parser, write_table_page  # noqa: E402


def steal_s() -> float:
    """Seconds of CPU time stolen from this machine's CPUs since boot (``/proc/stat``, all CPUs)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--minutes", type=float, default=4.0)
    args = options.parse_args()
    a = np.random.default_rng(0).normal(size=(400, 400))
    work(a)  # warm-up
    started, calls = time.perf_counter(), []
    while time.perf_counter() - started < 60 * args.minutes:
        before = steal_s()
        seconds = work(a)
        calls.append({"at_s": time.perf_counter() - started, "seconds": seconds, "steal_s": steal_s() - before})
    minute: dict[int, list[dict[str, float]]] = {}
    for c in calls:
        minute.setdefault(int(c["at_s"] // 60), []).append(c)
    first = statistics.median(c["seconds"] for c in minute[0])
    per_minute = [
        {
            "minute": m,
            "calls": len(cs),
            "median_s": statistics.median(c["seconds"] for c in cs),
            "vs_first_minute": statistics.median(c["seconds"] for c in cs) / first,
            "steal_s": sum(c["steal_s"] for c in cs),
        }
        for m, cs in sorted(minute.items())
    ]
    result = {**machine(), "minutes": args.minutes, "per_minute": per_minute, "calls": calls}
    rows = [
        [r["minute"], r["calls"], f"{1000 * r['median_s']:.1f}", f"{r['vs_first_minute']:.3f}x", f"{r['steal_s']:.2f}"]
        for r in per_minute
    ]
    write_table_page(
        args.out, "machine_drift", result, "A fixed computation over minutes",
        ["minute", "calls", "median (ms)", "against the first minute", "steal (s)"], rows, "1 thread",
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
