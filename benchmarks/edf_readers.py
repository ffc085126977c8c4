"""Which EDF library devicepipe reads with: edfio against pyedflib on a 24-hour two-lead ECG.

Writes a 24 h, 2-channel, 250 Hz EDF+ (21.6 M samples per channel) with edfio, then times in
one run, interleaved, each library reading (a) one whole channel and (b) a 10-minute slice
from the middle, as float64 physical values, checking that both give the same numbers.
Results: benchmarks/results/edf_readers.json.
Usage: python benchmarks/edf_readers.py [--hours 24] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import edfio
import numpy as np
import pyedflib
import torch

from devicepipe.bench.results import source_commit


def write_edf(path: Path, hours: float, rate: int = 250) -> int:
    n = int(hours * 3600 * rate)
    rng = np.random.default_rng(0)
    signals = [
        edfio.EdfSignal(
            np.cumsum(rng.standard_normal(n)) * 1e-3 % 4 - 2, rate, label=f"ECG{i}", physical_range=(-5.0, 5.0)
        )
        for i in range(2)
    ]
    edfio.Edf(signals).write(path)
    return n


def edfio_whole(path: Path) -> np.ndarray:
    return edfio.read_edf(path, lazy_load_data=True).signals[0].data


def edfio_slice(path: Path, start_s: float, stop_s: float) -> np.ndarray:
    return edfio.read_edf(path, lazy_load_data=True).signals[0].get_data_slice(start_s, stop_s)


def pyedflib_whole(path: Path) -> np.ndarray:
    with pyedflib.EdfReader(str(path)) as f:
        return f.readSignal(0)


def pyedflib_slice(path: Path, start_s: float, stop_s: float, rate: int = 250) -> np.ndarray:
    with pyedflib.EdfReader(str(path)) as f:
        return f.readSignal(0, start=int(start_s * rate), n=int((stop_s - start_s) * rate))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "holter.edf"
        n = write_edf(path, args.hours)
        mid = args.hours * 1800
        cases = {
            "edfio whole channel": lambda: edfio_whole(path),
            "pyedflib whole channel": lambda: pyedflib_whole(path),
            "edfio 10-min slice": lambda: edfio_slice(path, mid, mid + 600),
            "pyedflib 10-min slice": lambda: pyedflib_slice(path, mid, mid + 600),
        }
        a, b = edfio_whole(path), pyedflib_whole(path)
        same_whole = float(np.max(np.abs(a - b)))
        same_slice = float(np.max(np.abs(edfio_slice(path, mid, mid + 600) - pyedflib_slice(path, mid, mid + 600))))
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeats):  # interleaved: the machine's drift hits every case alike
            for name, fn in cases.items():
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
        size = path.stat().st_size
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": source_commit(Path(__file__).resolve().parents[1]),  # "-dirty" where tracked files differ
        "machine": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "threads": "one (neither library uses more)",
        "versions": {"edfio": edfio.__version__, "pyedflib": pyedflib.__version__, "torch": torch.__version__},
        "file": {"hours": args.hours, "channels": 2, "sampling_rate_hz": 250, "samples_per_channel": n, "bytes": size},
        "max_abs_difference": {"whole": same_whole, "slice": same_slice},
        "repeats": args.repeats,
        "median_s": {k: statistics.median(v) for k, v in times.items()},
        "all_s": times,
    }
    out = Path(__file__).parent / "results" / "edf_readers.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    for k, v in result["median_s"].items():
        print(f"{k:24s} {v * 1e3:9.1f} ms")
    print("max |edfio - pyedflib|:", result["max_abs_difference"])


if __name__ == "__main__":
    main()
