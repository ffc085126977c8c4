"""Beat-detection accuracy of devicepipe's ECG detector on the shared real recordings.

Prints one row per record (first channel) with TP, FP, FN, sensitivity, positive
predictivity and F1 under the EC57-style convention of ../shared/data/README.md (150 ms
tolerance, first and last 0.5 s not scored), and the CPSC 2021 records pooled.

    python benchmarks/ecg_accuracy.py [--data DIR] [--method ricker|seed] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from devicepipe.ecg import BeatScore, ecg_peaks, evaluate_beats
from devicepipe.io import read_beat_annotations, read_series

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CPSC = [
    "data_21_7",
    "data_21_8",
    "data_21_9",
    "data_84_1",
    "data_84_2",
    "data_84_3",
    "data_92_12",
    "data_92_19",
    "data_92_4",
]


def records(data: Path) -> list[tuple[str, str, Path]]:
    """(group, name, record path) for MIT-BIH 100 and the nine CPSC 2021 records."""
    return [("mitdb", "100", data / "mitdb" / "100")] + [("cpsc2021", r, data / "cpsc2021" / r) for r in CPSC]


def score_record(path: Path, method: str = "ricker", **options) -> tuple[BeatScore, int, float]:
    """Score the detector on the first channel of one record: (score, beats, sampling rate)."""
    rec = read_series(path, channel=0)
    ref = read_beat_annotations(path)
    peaks = ecg_peaks(rec.samples, rec.sampling_rate, method=method, **options)
    score = evaluate_beats(ref.samples, peaks, rec.sampling_rate, n_samples=rec.n_samples)
    return score, int(peaks.numel()), rec.sampling_rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--method", default="ricker")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if not (args.data / "mitdb" / "100.hea").exists():
        print(f"no recordings under {args.data}; pass --data DIR", file=sys.stderr)
        return 2
    rows, pooled = [], BeatScore(0, 0, 0)
    print(f"{'record':<12}{'fs':>6}{'TP':>7}{'FP':>6}{'FN':>6}{'Se':>9}{'PPV':>9}{'F1':>9}")
    for group, name, path in records(args.data):
        score, _, fs = score_record(path, args.method)
        if group == "cpsc2021":
            pooled = pooled + score
        rows.append({"group": group, "record": name, "sampling_rate": fs, **score.to_dict()})
        print(
            f"{name:<12}{fs:>6g}{score.tp:>7}{score.fp:>6}{score.fn:>6}"
            f"{score.sensitivity:>9.4f}{score.ppv:>9.4f}{score.f1:>9.4f}"
        )
    print(
        f"{'CPSC pooled':<12}{'':>6}{pooled.tp:>7}{pooled.fp:>6}{pooled.fn:>6}"
        f"{pooled.sensitivity:>9.4f}{pooled.ppv:>9.4f}{pooled.f1:>9.4f}"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"method": args.method, "records": rows, "cpsc_pooled": pooled.to_dict()}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
