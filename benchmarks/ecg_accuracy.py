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

from evaluation import annotated_records, score_record  # beside this script

from devicepipe.ecg import BeatScore

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def records(data: Path) -> list[tuple[str, str, Path]]:
    """(group, name, record path) for MIT-BIH 100 and the nine CPSC 2021 records."""
    return annotated_records(data)


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
