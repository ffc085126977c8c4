"""Where a short detection call's time goes: the tensor operations of one 10-s ECG at 500 Hz.

    python benchmarks/short_call_profile.py        # a few seconds

Profiles ``ecg_peaks`` on a CPSC 2019 record (10 s at 500 Hz; a simulated one without the shared
data) at one thread with ``torch.profiler``, after warm-up calls: how many operator calls one
detection makes, their own time, the operators that take most of it, and the call's wall time
beside sleepecg's on the same signal (medians of interleaved calls). A call of this size is
fixed cost: the operators each take a few microseconds whatever the length. Then the call's
steps, each timed on its own (medians of interleaved calls): the checks of the input, the
filter's kernel, the filtered signal, the thresholds from it, the candidates, and the rules that
choose beats among them; the first four work on the signal, the last two on a few dozen
candidates.

Results: ``benchmarks/results/short_call_profile.{json,md}``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its OpenMP runtime

import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import sleepecg  # noqa: E402
import torch  # noqa: E402
from results_io import heading, machine, parser, table, write_results  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import devicepipe as dp  # noqa: E402
from devicepipe.ecg import ecg_peaks  # noqa: E402
from devicepipe.ecg.inputs import check_input  # noqa: E402
from devicepipe.ecg.ricker import Ricker, abs_max  # noqa: E402
from devicepipe.io import read_series  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("DEVICEPIPE_DATA", ROOT.parent / "shared" / "data"))
CALLS = 20


#: The steps of one call, as ``_peaks_ricker_rows`` runs them; the first four on the signal.
STEPS = ("input checks", "filter kernel", "filtered signal", "thresholds", "candidates", "beat rules")


def _one_call(signal: torch.Tensor, fs: float, times: dict[str, list[float]]) -> None:
    """One detection of ``signal``, step by step as ``_peaks_ricker_rows`` runs it, each step's
    seconds appended to ``times``."""
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        times[name].append(now - clock[0])
        clock[0] = now

    with torch.inference_mode():
        x = check_input(signal, fs, "ecg_peaks()").reshape(1, -1)
        r, n = Ricker(float(fs)), x.shape[-1]
        lap("input checks")
        kernel = r.kernel(x)
        lap("filter kernel")
        feature, negative = r.feature(x, kernel, *r.edge_means(x, x), start=True, end=True)
        lap("filtered signal")
        stride = r.subsample_stride(n)
        limits = r.thresholds(*r.summaries(feature), feature[..., ::stride], abs_max(x[..., ::stride]))
        lap("thresholds")
        cands = r.candidates(x, feature, negative, 0, (0, n))
        lap("candidates")
        r.select(r.accept(cands, *limits), 1, n)
        lap("beat rules")


def step_times(signal: torch.Tensor, fs: float, calls: int = 300) -> dict[str, float]:
    """Median microseconds of each of :data:`STEPS` in one detection of ``signal``, over
    ``calls`` calls (the first 50 left out)."""
    times: dict[str, list[float]] = {k: [] for k in STEPS}
    for _ in range(calls):
        _one_call(signal, fs, times)
    return {k: 1e6 * statistics.median(v[50:]) for k, v in times.items()}


def main() -> int:
    args = parser(__doc__).parse_args()
    torch.set_num_threads(1)
    records = sorted((DATA / "cpsc2019").glob("*.hea"))
    if records:
        rec = read_series(records[0].with_suffix(""), channel=0, device="cpu")
        signal, fs, source = rec.samples.float(), rec.sampling_rate, f"CPSC 2019 {records[0].stem}"
    else:
        signal, fs, source = dp.simulate_ecg(10.0, 500.0, seed=0).signal, 500.0, "simulated, 10 s at 500 Hz"
    as64 = signal.numpy().astype(np.float64)
    ours_s, peer_s = [], []
    for i in range(300):  # interleaved; the first 50 warm up
        for side in (0, 1) if i % 2 else (1, 0):
            started = time.perf_counter()
            ecg_peaks(signal, fs) if side == 0 else sleepecg.detect_heartbeats(as64, fs)
            (ours_s if side == 0 else peer_s).append(time.perf_counter() - started)
    ours_ms, peer_ms = (1000 * statistics.median(t[50:]) for t in (ours_s, peer_s))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(CALLS):
            ecg_peaks(signal, fs)
    steps_us = step_times(signal, fs)
    ops = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    calls = sum(e.count for e in ops) / CALLS
    self_us = sum(e.self_cpu_time_total for e in ops) / CALLS
    top = sorted(ops, key=lambda e: -e.self_cpu_time_total)[:12]
    rows = [
        {"op": e.key, "calls_per_detection": e.count / CALLS, "self_us_per_detection": e.self_cpu_time_total / CALLS}
        for e in top
    ]
    result = {
        **machine(),
        "input": source,
        "samples": int(signal.numel()),
        "ours_ms_median": round(ours_ms, 3),
        "sleepecg_ms_median": round(peer_ms, 3),
        "operator_calls_per_detection": round(calls, 1),
        "operator_self_us_per_detection": round(self_us, 1),
        "top_operators": rows,
        "steps_us_median": {k: round(v, 1) for k, v in steps_us.items()},
        "signal_steps_us": round(sum(steps_us[k] for k in STEPS[:4]), 1),
        "candidate_steps_us": round(sum(steps_us[k] for k in STEPS[4:]), 1),
    }
    lines = [
        heading("One short detection call, profiled", result, result["cpu"], "1 thread"),
        "",
        f"{source}, {signal.numel():,} samples: ours {ours_ms:.3f} ms, sleepecg {peer_ms:.3f} ms (medians of 250 "
        f"interleaved calls each). One detection makes {calls:.0f} operator calls (the nested ones counted), "
        f"{self_us:.0f} us of their own time.",
        "",
        *table(
            ["operator", "calls per detection", "own time per detection (us)"],
            [[r["op"], f"{r['calls_per_detection']:.0f}", f"{r['self_us_per_detection']:.1f}"] for r in rows],
        ),
    ]
    lines += [
        "",
        f"The call's steps, each timed on its own (medians of 250 calls): on the signal "
        f"{result['signal_steps_us']:.0f} us, on the candidates {result['candidate_steps_us']:.0f} us.",
        "",
        *table(["step", "median (us)"], [[k, f"{v:.1f}"] for k, v in steps_us.items()]),
    ]
    write_results(args.out, "short_call_profile", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
