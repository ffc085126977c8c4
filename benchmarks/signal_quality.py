"""Signal quality on the annotated records: how many false beats fall in beats or stretches marked
poor, and how many true beats are marked with them.

Each record's first channel: beats found by the default detector, cut centred, each scored by
its correlation with the recording's median beat and by the median of that over its 10-s
stretch (``devicepipe.ecg.beat_quality``); a beat is marked when either is under
``POOR_QUALITY`` (0.5). A detection is false when no reference beat lies within 150 ms.

    python benchmarks/signal_quality.py [--data DIR] [--out DIR]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from evaluation import annotated_records  # beside this script
from results_io import machine, parser, table, write_results

from devicepipe.ecg import MATCH_TOLERANCE_S, POOR_QUALITY, beat_quality, ecg_peaks, ecg_segment
from devicepipe.io import read_series
from devicepipe.io.reference import read_beat_annotations

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def run(data: Path) -> dict[str, Any]:
    records = {}
    for _group, name, path in annotated_records(data):
        rec = read_series(path, 0)
        fs = rec.sampling_rate
        ref = np.asarray(read_beat_annotations(path).samples)
        beats = ecg_segment(rec.samples, ecg_peaks(rec.samples, fs), fs, mode="centered")
        quality = beat_quality(beats)
        peaks = beats.peaks.numpy()
        false = np.array([np.min(np.abs(ref - p)) > MATCH_TOLERANCE_S * fs for p in peaks], dtype=bool)
        marked = ~quality.usable(POOR_QUALITY).numpy()
        stretches = int(peaks.max() // int(round(quality.window_s * fs))) + 1 if peaks.size else 0
        poor_stretches = np.unique((peaks // int(round(quality.window_s * fs)))[quality.stretch.numpy() < POOR_QUALITY])
        records[name] = {
            "cut_beats": int(peaks.size),
            "false_beats": int(false.sum()),
            "false_beats_marked": int((false & marked).sum()),
            "true_beats": int((~false).sum()),
            "true_beats_marked": int((~false & marked).sum()),
            "stretches": stretches,
            "poor_stretches": int(poor_stretches.size),
            "median_quality": float(np.median(quality.beat.numpy())) if peaks.size else None,
        }
    totals = {k: sum(r[k] for r in records.values()) for k in next(iter(records.values())) if k != "median_quality"}
    return {**machine(), "poor_quality": POOR_QUALITY, "window_s": 10.0, "records": records, "total": totals}


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = p.parse_args(argv)
    result = run(args.data)
    rows = [
        [
            name,
            r["cut_beats"],
            f"{r['false_beats_marked']} of {r['false_beats']}",
            f"{r['true_beats_marked']} of {r['true_beats']}",
            f"{r['poor_stretches']} of {r['stretches']}",
            f"{r['median_quality']:.3f}",
        ]  # fmt: skip
        for name, r in [*result["records"].items()]
    ]
    t = result["total"]
    marked = [f"{t['false_beats_marked']} of {t['false_beats']}", f"{t['true_beats_marked']} of {t['true_beats']}"]
    rows.append(["all", t["cut_beats"], *marked, f"{t['poor_stretches']} of {t['stretches']}", "-"])
    lines = [
        "# Signal quality: false beats in marked beats and stretches",
        "",
        f"{result['date']}, commit {result['commit']}, {result['cpu']}, torch {result['torch']}; first channel, "
        "beats cut centred, marked "
        f"under {POOR_QUALITY} (own correlation with the median beat, or its 10-s stretch's median). "
        "Produced by `python benchmarks/signal_quality.py`.",
        "",
        *table(
            ["record", "cut beats", "false beats marked", "true beats marked", "poor 10-s stretches", "median quality"],
            rows,
        ),  # fmt: skip
    ]
    write_results(args.out, "signal_quality", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
