"""Quality of devicepipe's learned anomaly scores on real data.

1. ECG5000 (UCR): train on the normal beats of the training split, score the test split;
   ROC AUC normal vs abnormal for one VAE and for a 5-member vmap ensemble.
2. MIT-BIH 100: run the ``ecg`` pipeline on the first channel and report the AUC of the
   beat scores for the reference's A and V beats against N (for information: 34 abnormal
   beats among 2273).
3. AEP hourly load: run the ``series`` pipeline (days, MLP autoencoder) and list the flagged
   days with their scores, for a person to judge.

    python benchmarks/learning_eval.py [--data DIR] [--out benchmarks/results/learning_eval.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
from evaluation import ecg5000_auc  # beside this script

from devicepipe.bench.results import source_commit
from devicepipe.io import read_beat_annotations
from devicepipe.learning.score import roc_auc
from devicepipe.pipelines import LearnSettings, run_ecg, run_series

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def mitdb_auc(data: Path, work: Path) -> dict:
    record = data / "mitdb" / "100"
    result = run_ecg(record, work / "mitdb", settings=LearnSettings(epochs=30), device="cpu")
    table = pq.read_table(work / "mitdb" / "embeddings.parquet", columns=["peak", "score"])
    peaks, scores = table.column("peak").to_numpy(), table.column("score").to_numpy()
    ann = read_beat_annotations(record)
    nearest = np.abs(ann.samples[None, :] - peaks[:, None]).argmin(1)
    matched = np.abs(ann.samples[nearest] - peaks) <= 0.15 * 360
    symbols = ann.symbols[nearest][matched]
    keep = np.isin(symbols, ["N", "A", "V"])
    labels = symbols[keep] != "N"
    return {
        "auc_A_V_vs_N": roc_auc(labels, scores[matched][keep]),
        "beats": int(keep.sum()),
        "abnormal": int(labels.sum()),
        "flagged": result.summary["counts"]["flagged"],
        "abnormal_flagged": int((labels & (scores[matched][keep] > result.summary["threshold"])).sum()),
    }


def describe_days(csv: Path, days: list[str]) -> list[str]:
    """What the calendar and the data say about each day: holidays, hour-to-hour jumps, load percentiles."""
    import datetime as dt

    import pandas as pd
    from dateutil.easter import easter

    df = pd.read_csv(csv)
    load = df.assign(t=pd.to_datetime(df.Datetime, format="%m/%d/%Y %H:%M")).groupby("t").AEP_MW.mean().sort_index()
    by_day = load.groupby(load.index.date)
    peak_pct, mean_pct = by_day.max().rank(pct=True), by_day.mean().rank(pct=True)
    jump = load.diff().abs().groupby(load.index.date).max()
    big_jump = jump.quantile(0.999)
    out = []
    for s in days:
        day = dt.date.fromisoformat(s)
        notes = []
        thanksgiving = max(dt.date(day.year, 11, d) for d in range(22, 29) if dt.date(day.year, 11, d).weekday() == 3)
        second_sunday_march = [dt.date(day.year, 3, d) for d in range(8, 15) if dt.date(day.year, 3, d).weekday() == 6][
            0
        ]
        named = {
            thanksgiving: "Thanksgiving",
            thanksgiving - dt.timedelta(1): "day before Thanksgiving",
            easter(day.year): "Easter Sunday",
            easter(day.year) - dt.timedelta(1): "Holy Saturday",
            dt.date(day.year, 12, 25): "Christmas Day",
            dt.date(day.year, 7, 4): "Independence Day",
            dt.date(day.year, 1, 1): "New Year's Day",
        }
        if day.year >= 2007:
            named[second_sunday_march] = "daylight saving starts (23-hour day)"
        if day in named:
            notes.append(named[day])
        if jump[day] > big_jump:
            notes.append(f"hour-to-hour jump of {jump[day]:.0f} MW (top 0.1 % of days)")
        notes.append(
            f"{day.strftime('%A')}, daily peak at percentile {100 * peak_pct[day]:.1f}, "
            f"daily mean at percentile {100 * mean_pct[day]:.1f}"
        )
        out.append(f"{s}: " + "; ".join(notes))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not (args.data / "ecg5000").exists():
        print(f"no data under {args.data}; pass --data DIR", file=sys.stderr)
        return 2
    result: dict = {
        "date": datetime.date.today().isoformat(),
        "commit": source_commit(Path(__file__).resolve().parents[1]),  # "-dirty" where tracked files differ
        "torch_threads": torch.get_num_threads(),
    }
    started = time.perf_counter()
    one = [ecg5000_auc(args.data / "ecg5000", members=1, epochs=300, latent=4, seed=s) for s in (0, 1, 2)]
    ens = ecg5000_auc(args.data / "ecg5000", members=5, epochs=300, latent=4, seed=0)
    result["ecg5000"] = {
        "one_vae_auc_by_seed": [r.auc for r in one],
        "ensemble5_auc": ens.auc,
        "settings": {"epochs": 300, "latent": 4, "width": 128},
        "seconds": time.perf_counter() - started,
    }
    print(
        f"ECG5000 AUC, one VAE (seeds 0-2): {', '.join(f'{r.auc:.4f}' for r in one)}; 5-member ensemble: {ens.auc:.4f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        result["mitdb100"] = mitdb_auc(args.data, work)
        m = result["mitdb100"]
        print(
            f"MIT-BIH 100: AUC A+V vs N {m['auc_A_V_vs_N']:.4f} over {m['beats']} beats ({m['abnormal']} abnormal); "
            f"{m['flagged']} flagged, {m['abnormal_flagged']} of them abnormal"
        )
        series = run_series(
            args.data / "electricity" / "AEP_hourly.csv",
            work / "aep",
            column="AEP_MW",
            time_column="Datetime",
            device="cpu",
        )
        result["aep"] = {k: series.summary[k] for k in ("windows", "threshold", "flagged")}
        described = describe_days(
            args.data / "electricity" / "AEP_hourly.csv", [f["start"][:10] for f in series.summary["flagged"]]
        )
        result["aep"]["described"] = described
        print(f"AEP: {len(described)} days flagged, highest score first:")
        print("\n".join("  " + d for d in described))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
