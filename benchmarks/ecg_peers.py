"""devicepipe's beat detector beside its peers, on the same recordings and the same signal.

Accuracy: our detector, NeuroKit2 (``ecg_clean`` + ``ecg_peaks``), sleepecg
(``detect_heartbeats``) and wfdb's ``xqrs_detect`` on MIT-BIH 100, the nine CPSC 2021 records
and the CPSC 2019 records of ../shared/data (first channel, 150 ms tolerance, edges of 0.5 s
not scored): each set pooled, with its worst record, and each detector's throughput over all
those records in samples per second.

Speed: beat detection on one in-memory simulated ECG of ``--samples`` float32 samples at
250 Hz (default 20 M, about 22 h), ours (warmed up, median of ``--repeats``) and the peers
(one warm-up on a short signal, then one timed run each), in the same process.

    python benchmarks/ecg_peers.py [--data DIR] [--samples 20000000] [--json OUT]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ecg_accuracy import DEFAULT_DATA, by_set, records  # noqa: E402

from devicepipe.bench.results import source_commit  # noqa: E402
from devicepipe.core.device import device_report  # noqa: E402
from devicepipe.ecg import ecg_peaks, evaluate_beats  # noqa: E402
from devicepipe.io import read_beat_annotations, read_series  # noqa: E402
from devicepipe.simulate import simulate_ecg  # noqa: E402

Detector = Callable[[np.ndarray, float], np.ndarray]


def ours(x: np.ndarray, fs: float) -> np.ndarray:
    return ecg_peaks(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), fs).numpy()


def neurokit(x: np.ndarray, fs: float) -> np.ndarray:
    import neurokit2 as nk

    cleaned = nk.ecg_clean(x, sampling_rate=fs)
    _, info = nk.ecg_peaks(cleaned, sampling_rate=fs)
    return np.asarray(info["ECG_R_Peaks"], dtype=np.int64)


def sleepecg(x: np.ndarray, fs: float) -> np.ndarray:
    import sleepecg as se

    return np.asarray(se.detect_heartbeats(np.asarray(x, dtype=np.float64), fs), dtype=np.int64)


def xqrs(x: np.ndarray, fs: float) -> np.ndarray:
    from wfdb import processing

    return np.asarray(processing.xqrs_detect(np.asarray(x, dtype=np.float64), fs, verbose=False), dtype=np.int64)


DETECTORS: dict[str, Detector] = {"devicepipe": ours, "neurokit2": neurokit, "sleepecg": sleepecg, "wfdb-xqrs": xqrs}


def available() -> dict[str, Detector]:
    found = {}
    for name, fn in DETECTORS.items():
        try:
            fn(simulate_ecg(10, 250, seed=1).signal.numpy(), 250.0)  # import and warm up
            found[name] = fn
        except ImportError as exc:
            print(f"skipping {name}: {exc}", file=sys.stderr)
    return found


def accuracy(detectors: dict[str, Detector], data: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    loaded = []
    for group, name, path in records(data):
        rec = read_series(path, channel=0)
        loaded.append(
            (
                group,
                name,
                rec.samples.numpy().astype(np.float64),
                rec.sampling_rate,
                read_beat_annotations(path).samples,
            )
        )
    for det_name, fn in detectors.items():
        per, scored, seconds, samples = {}, [], 0.0, 0
        for group, name, x, fs, ref in loaded:
            started = time.perf_counter()
            peaks = fn(x, fs)
            seconds += time.perf_counter() - started
            samples += x.size
            score = evaluate_beats(ref, peaks, fs, n_samples=x.size)
            per[name] = score.to_dict()
            scored.append((group, name, score))
        out[det_name] = {"records": per, "sets": by_set(scored), "samples_per_s": samples / seconds}
    return out


def speed(detectors: dict[str, Detector], n_samples: int, repeats: int) -> dict[str, dict]:
    fs = 250.0
    x = simulate_ecg(n_samples / fs, fs, seed=0, ectopic_rate=0.01).signal.numpy()
    out = {}
    for name, fn in detectors.items():
        if name == "wfdb-xqrs":
            continue  # pure Python per beat: hours for 20 M samples
        times = []
        for _ in range(repeats if name == "devicepipe" else 1):
            started = time.perf_counter()
            peaks = fn(x, fs)
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        out[name] = {
            "seconds_median": median,
            "seconds_min": min(times),
            "seconds_max": max(times),
            "repeats": len(times),
            "samples_per_s": x.size / median,
            "beats": int(peaks.size),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--samples", type=int, default=20_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    detectors = available()
    result = {
        "date": datetime.date.today().isoformat(),
        "commit": source_commit(Path(__file__).resolve().parents[1]),  # "-dirty" where tracked files differ
        "machine": {"cpu": device_report()["cpu"], "platform": platform.platform()},
        "torch_threads": torch.get_num_threads(),
        "versions": {
            m: __import__(m).__version__
            for m in ("torch", "numpy", "neurokit2", "sleepecg", "wfdb")
            if m in sys.modules or m == "torch"
        },
    }
    if (args.data / "mitdb" / "100.hea").exists():
        result["accuracy"] = accuracy(detectors, args.data)
        print(f"{'detector':<12}{'set':<10}{'pooled F1':>10}{'Se':>8}{'PPV':>8}{'worst F1':>10}{'Msamples/s':>12}")
        for name, r in result["accuracy"].items():
            for group, g in r["sets"].items():
                p = g["pooled"]
                print(
                    f"{name:<12}{group:<10}{p['f1']:>10.4f}{p['sensitivity']:>8.4f}{p['ppv']:>8.4f}"
                    f"{g['worst']['f1']:>10.4f}{r['samples_per_s'] / 1e6:>12.2f}"
                )
    else:
        print(f"no recordings under {args.data}: accuracy skipped", file=sys.stderr)
    result["speed"] = speed(detectors, args.samples, args.repeats)
    print(f"\nbeat detection on {args.samples:,} simulated samples (250 Hz), {torch.get_num_threads()} torch threads")
    for name, r in result["speed"].items():
        print(
            f"{name:<12}{r['seconds_median']:>8.3f} s{r['samples_per_s'] / 1e6:>10.1f} M samples/s"
            f"  (min {r['seconds_min']:.3f}, max {r['seconds_max']:.3f}, n={r['repeats']})"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
