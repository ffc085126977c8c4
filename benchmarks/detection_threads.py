"""R-peak detection at one and at two threads, idle and under load: where a second thread pays.

    python benchmarks/detection_threads.py            # under a minute on 2 cores
    python benchmarks/detection_threads.py --quick    # checks that it runs

``ecg_peaks`` on simulated ECGs at 250 Hz of 10 k to 20 M samples, and on 1,000 10-s ECGs at
500 Hz in one batched call (5 M samples), three ways, interleaved in an order rotated from one
repeat to the next, ``OMP_WAIT_POLICY=PASSIVE`` (what the ``devicepipe`` command sets): torch at 1
and at 2 threads, the count fixed by ``DEVICEPIPE_THREADS`` (which ``ecg_peaks`` obeys over its own
choice), and torch at 2 threads with ``ecg_peaks`` choosing (``devicepipe.core.threads.detection_threads``:
the default). Idle, and under a controlled load: two processes that spin on the 2 cores for the
whole measurement. Per input, the ratio of the 1-thread time to the 2-thread time within each
repeat, median and bootstrap 95 % interval; above 1, two threads were faster; and each input's
loaded time over its idle time, for the policy and for 2 fixed threads. Outputs are checked equal
on every side.

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
from devicepipe.core.threads import THREADS_ENV  # noqa: E402

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


SIDES = ("1", "2", "policy")  # torch at 1 thread, at 2, and at 2 with ecg_peaks choosing (the default)


def _timed(x: torch.Tensor, fs: float, side: str) -> tuple[float, Any]:
    if side == "policy":
        os.environ.pop(THREADS_ENV, None)  # ecg_peaks' own choice: detection_threads
        torch.set_num_threads(2)
    else:
        os.environ[THREADS_ENV] = side  # ecg_peaks' own choice set aside
        torch.set_num_threads(int(side))
    started = time.perf_counter()
    found = dp.ecg_peaks(x, fs)
    return time.perf_counter() - started, found


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list):
        return all(torch.equal(p, q) for p, q in zip(a, b, strict=True))
    return torch.equal(a, b)


def _interval(ratios: np.ndarray) -> list[float]:
    rng = np.random.default_rng(0)
    boot = np.median(ratios[rng.integers(0, ratios.size, (2000, ratios.size))], axis=1)
    return [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))]


def compare(x: torch.Tensor, fs: float, repeats: int) -> dict[str, Any]:
    """1 thread, 2 threads and the policy on one input, interleaved (rotated order), after a warm-up each."""
    first = [_timed(x, fs, side)[1] for side in SIDES]
    if not all(_same(first[0], other) for other in first[1:]):
        raise SystemExit("different peaks at 1 and 2 threads or under the policy")
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    for r in range(repeats):
        for side in SIDES[r % 3 :] + SIDES[: r % 3]:
            times[side].append(_timed(x, fs, side)[0])
    ratios = np.asarray(times["1"]) / np.asarray(times["2"])
    return {
        "seconds_1_thread": times["1"],
        "seconds_2_threads": times["2"],
        "seconds_policy": times["policy"],
        "median_1_thread_s": float(np.median(times["1"])),
        "median_2_threads_s": float(np.median(times["2"])),
        "median_policy_s": float(np.median(times["policy"])),
        "ratio_1_over_2": float(np.median(ratios)),
        "ratio_ci95": _interval(ratios),
    }


def loaded_over_idle(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """Per input: the median loaded time over the median idle time of the side ``key``
    (``seconds_policy``, ...), with a bootstrap 95 % interval (each phase resampled on its own)."""
    rng = np.random.default_rng(1)
    out = {}
    for idle in (r for r in rows if r["load"] == "idle"):
        loaded = next(r for r in rows if r["load"] != "idle" and r["input"] == idle["input"])
        a, b = np.asarray(loaded[key]), np.asarray(idle[key])
        boot = np.median(a[rng.integers(0, a.size, (2000, a.size))], axis=1) / np.median(
            b[rng.integers(0, b.size, (2000, b.size))], axis=1
        )
        out[idle["input"]] = {
            "ratio": float(np.median(a) / np.median(b)),
            "ci95": [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))],
        }
    return out


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
    slowdown = {key: loaded_over_idle(rows, key) for key in ("seconds_policy", "seconds_2_threads")}
    result = {
        **machine(),
        "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
        "repeats": repeats,
        "rows": rows,
        "loaded_over_idle": slowdown,
    }
    lines = [
        heading("Detection at one and two threads", result, result["cpu"], "OMP_WAIT_POLICY=PASSIVE"),
        "",
        f"Median ms per `ecg_peaks` call, {repeats} repeats in rotated order; torch at 1 thread, at 2, and at 2 "
        "with `ecg_peaks` choosing (the policy, the default); ratio = the 1-thread time / the 2-thread time "
        "within a repeat, median and bootstrap 95 % interval (above 1: two threads faster).",
        "",
        *table(
            ["load", "samples", "1 thread (ms)", "2 threads (ms)", "policy (ms)", "1 / 2 threads", "95 % interval"],
            [
                [r["load"], r["input"], f"{1000 * r['median_1_thread_s']:.2f}", f"{1000 * r['median_2_threads_s']:.2f}"]
                + [f"{1000 * r['median_policy_s']:.2f}", f"{r['ratio_1_over_2']:.2f}x"]
                + ["{:.2f}-{:.2f}".format(*r["ratio_ci95"])]
                for r in rows
            ],
        ),
        "",
        "The same call under two busy processes against idle: median loaded time / median idle time, bootstrap "
        "95 % interval (the target: at most 2x).",
        "",
        *table(
            ["samples", "policy loaded / idle", "95 % interval", "2 threads loaded / idle", "95 % interval"],
            [
                [name, f"{p['ratio']:.2f}x", "{:.2f}-{:.2f}".format(*p["ci95"])]
                + [f"{t['ratio']:.2f}x", "{:.2f}-{:.2f}".format(*t["ci95"])]
                for name, p in slowdown["seconds_policy"].items()
                for t in [slowdown["seconds_2_threads"][name]]
            ],
        ),
    ]
    write_results(args.out, "detection_threads" + ("_quick" if args.quick else ""), result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
