"""What the detector's spike rule (a candidate under ``spike_ms`` wide at half height is none) costs
a call: ``ecg_peaks`` with the rule (the default) and without it (``spike_ms=0``), alternated, at
one torch thread, on a 10-s CPSC 2019 record (500 Hz), a CPSC 2021 record and 20 M simulated
samples at 250 Hz; the peaks of both checked equal where no spike is in the signal.

    python benchmarks/spike_rule_cost.py [--data DIR] [--out DIR] [--repeats 15]
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch
from results_io import machine, parser, write_table_page  # beside this script

from devicepipe.ecg import ecg_peaks
from devicepipe.io import read_series
from devicepipe.simulate import simulate_ecg

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _time(x: torch.Tensor, fs: float, calls: int, **options: float) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        ecg_peaks(x, fs, **options)
    return (time.perf_counter() - started) / calls


def run(data: Path, repeats: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    inputs = {
        "CPSC 2019 data_00014 (10 s, 500 Hz)": (read_series(data / "cpsc2019" / "data_00014"), 200),
        "CPSC 2021 data_21_8 (263 s, 200 Hz)": (read_series(data / "cpsc2021" / "data_21_8", 0), 20),
    }
    out = {}
    cases = {name: (rec.samples.float(), float(rec.sampling_rate), calls) for name, (rec, calls) in inputs.items()}
    sim = simulate_ecg(80_000, 250.0, seed=3, noise_mV=0.05)  # 20 M samples
    cases["simulated, 20 M samples at 250 Hz"] = (sim.signal.float(), 250.0, 1)
    for name, (x, fs, calls) in cases.items():
        same = torch.equal(ecg_peaks(x, fs), ecg_peaks(x, fs, spike_ms=0.0))
        on, off = [], []
        for i in range(repeats):  # alternated, each first in turn
            for with_rule in (True, False) if i % 2 == 0 else (False, True):
                (on if with_rule else off).append(_time(x, fs, calls, **({} if with_rule else {"spike_ms": 0.0})))
        ratio = sorted(a / b for a, b in zip(on, off, strict=True))
        out[name] = {"with_s": statistics.median(on), "without_s": statistics.median(off),
                     "ratio_median": statistics.median(ratio), "ratio_max": ratio[-1], "ratio_min": ratio[0],
                     "same_peaks": same, "repeats": repeats, "calls_per_repeat": calls}  # fmt: skip
    return {**machine(), "torch_threads": 1, "cases": out}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    result = run(args.data, args.repeats)
    rows = [[name, f"{1e3 * c['with_s']:.3f}", f"{1e3 * c['without_s']:.3f}", f"{c['ratio_median']:.3f}",
             f"{c['ratio_min']:.3f}-{c['ratio_max']:.3f}", c["same_peaks"]]
            for name, c in result["cases"].items()]  # fmt: skip
    header = ["input", "with the rule (ms)", "without (ms)", "ratio (median)", "ratio (range)", "same peaks"]
    note = "Medians of alternated repeats; ratio: with over without."
    write_table_page(args.out, "spike_rule_cost", result, "The spike rule's cost per call", header, rows,
                     "torch at 1 thread", note=note)  # fmt: skip


if __name__ == "__main__":
    main()
