"""Beat-detection accuracy of devicepipe's ECG detector on the shared real recordings.

Prints one row per record (first channel) with TP, FP, FN, sensitivity, positive
predictivity and F1 under the EC57-style convention of ../shared/data/README.md (150 ms
tolerance, first and last 0.5 s not scored), then each set (MIT-BIH 100, the nine CPSC 2021
records, the CPSC 2019 records) pooled, with its worst record.

    python benchmarks/ecg_accuracy.py [--data DIR] [--method ricker|seed] [--json OUT] [--note TEXT]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from evaluation import DETECTION_SETS, detection_records, score_record  # beside this script

from devicepipe.bench.results import source_commit
from devicepipe.ecg import BeatScore

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def records(data: Path) -> list[tuple[str, str, Path]]:
    """(set, name, record path) for MIT-BIH 100, the nine CPSC 2021 and the CPSC 2019 records."""
    return detection_records(data)


def by_set(per_record: list[tuple[str, str, BeatScore]]) -> dict[str, dict]:
    """Each set's pooled score and its worst record (lowest F1), from (set, record, score) rows."""
    out: dict[str, dict] = {}
    for group in DETECTION_SETS:
        rows = [(name, score) for g, name, score in per_record if g == group]
        if not rows:
            continue
        pooled = BeatScore(0, 0, 0)
        for _, score in rows:
            pooled = pooled + score
        worst = min(rows, key=lambda r: r[1].f1)
        worst_record = {"record": worst[0], **worst[1].to_dict()}
        out[group] = {"records": len(rows), "pooled": pooled.to_dict(), "worst": worst_record}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--method", default="ricker")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--note", default="", help="what was measured (for example the commit), kept in the JSON")
    args = parser.parse_args(argv)
    if not (args.data / "mitdb" / "100.hea").exists():
        print(f"no recordings under {args.data}; pass --data DIR", file=sys.stderr)
        return 2
    rows, scored = [], []
    print(f"{'record':<12}{'fs':>6}{'TP':>7}{'FP':>6}{'FN':>6}{'Se':>9}{'PPV':>9}{'F1':>9}")
    for group, name, path in records(args.data):
        score, _, fs = score_record(path, args.method)
        scored.append((group, name, score))
        rows.append({"group": group, "record": name, "sampling_rate": fs, **score.to_dict()})
        print(
            f"{name:<12}{fs:>6g}{score.tp:>7}{score.fp:>6}{score.fn:>6}"
            f"{score.sensitivity:>9.4f}{score.ppv:>9.4f}{score.f1:>9.4f}"
        )
    sets = by_set(scored)
    print()
    for group, r in sets.items():
        p, w = r["pooled"], r["worst"]
        print(
            f"{group + ' pooled':<18}{p['tp']:>7}{p['fp']:>6}{p['fn']:>6}{p['sensitivity']:>9.4f}{p['ppv']:>9.4f}"
            f"{p['f1']:>9.4f}   worst {w['record']} {w['f1']:.4f}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "date": datetime.date.today().isoformat(),
                    "commit": source_commit(),
                    "note": args.note,
                    "method": args.method,
                    "records": rows,
                    "sets": sets,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
