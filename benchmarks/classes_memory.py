"""What the beat classes, the Holter summary and the HRV spectrum hold: NumPy's peak allocations
(tracemalloc) while they run on synthetic beats of a long recording.

    python benchmarks/classes_memory.py [--beats 2822170]

The beats: intervals of 0.857 s +- 0.05 (a 4-week recording at 70 bpm has 2,822,170), four shape
families, measures drawn at random. Three steps of the classes stage, each measured from what
it was handed: the rhythm (each beat's interval and prematurity), the decision (each beat's
class from its measures) and the Holter summary; and the HRV spectrum of the beats' intervals
(``hrv_frequency``: its grid stops growing past 5.5 hours, where it reaches its most points, and
the spline through the intervals is built a piece at a time), with its time. Results:
``benchmarks/results/classes_memory.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_io import RESULTS, machine, write_results  # noqa: E402

from devicepipe.ecg import classes  # noqa: E402
from devicepipe.ecg.rhythm import beat_rhythm  # noqa: E402
from devicepipe.heart.holter import holter_summary  # noqa: E402
from devicepipe.heart.spectral import hrv_frequency  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--beats", type=int, default=2_822_170)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n, k = args.beats, 4
    t = np.cumsum(rng.normal(0.857, 0.05, n))
    fit = classes._Fit(torch.randn(k, 50), 0, 90.0, torch.randn(30), 1.0)
    family, corr = rng.integers(-1, k, n), rng.uniform(0.5, 1, (n, k))
    corr_p, width, height = rng.uniform(0, 1, n), rng.normal(90, 5, n), rng.normal(1, 0.1, n)
    rough = rng.uniform(0, 1, n)  # each beat's roughness outside its QRS
    corr_l = rng.uniform(0.5, 1, n)  # each levelled QRS's correlation with the normal one
    after_prev = rng.uniform(-1, 1, n)  # each QRS's correlation with the one before
    peaks: dict[str, float] = {}
    tracemalloc.start()

    def step(name, run):
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = run()
        peaks[name] = tracemalloc.get_traced_memory()[1] - base
        return out

    rr_prev, early = step("rhythm", lambda: beat_rhythm(t))
    labelled = step(
        "decision",
        lambda: classes._decide(
            fit, t, rr_prev, early, width, height, family, corr, corr_p, corr_l, rough, after_prev, np.zeros(n, bool)
        ),
    )
    step(
        "holter_summary", lambda: holter_summary(t, labelled.labels, labelled.irregular, t[-1] + 1, labelled.not_beats)
    )
    rr_ms = np.diff(t, prepend=t[0] - 0.857) * 1000
    hrv_frequency(rr_ms[:300], t[:300])  # (its imports out of the measure)
    started = time.perf_counter()
    step("hrv_spectrum", lambda: hrv_frequency(rr_ms, t))
    spectrum_s = time.perf_counter() - started
    tracemalloc.stop()
    result = {
        **machine(),
        "beats": n,
        "peak_bytes": peaks,
        "bytes_per_beat": {name: b / n for name, b in peaks.items()},
        "hrv_spectrum_s": spectrum_s,  # (tracemalloc running)
    }
    rows = [f"| {name} | {b / 2**20:.0f} | {b / n:.0f} |" for name, b in peaks.items()]
    markdown = "\n".join(
        [
            f"# What the classes hold per beat ({n:,} synthetic beats; {result['date']}, commit {result['commit']})",
            "",
            "| step | peak NumPy allocations above its inputs (MiB) | bytes a beat |",
            "|---|---|---|",
            *rows,
            "",
            f"The spectrum took {spectrum_s:.2f} s (with tracemalloc running).",
        ]
    )
    write_results(args.out, "classes_memory", result, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
