"""A population model on every shared ECG record: time per epoch in one process and in N
DistributedDataParallel processes (torchrun), and the scoring throughput of the reloaded model.

    python benchmarks/population_model.py                       # CPU: 1 process vs 2 gloo processes
    python benchmarks/population_model.py --device cuda --nproc 2   # on a machine with 2 GPUs (NCCL)

The records: MIT-BIH 100, the nine CPSC 2021 records and the 25 CPSC 2019 records, listed in
one file and trained on with ``devicepipe train`` (each recording standardised on its own).
Every configuration trains the same fixed number of epochs from the same seed; the time per
epoch is the median of the epochs after the first (``history.csv``). Scoring: ``load_model``
then ``decision_function`` on every training beat, timed (warm-up, then the median of
repeats), in beats per second. Results: ``benchmarks/results/population_model.{json,md}``.
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

import torch

import devicepipe as dp
from devicepipe.anomaly import MODEL_NAME
from devicepipe.bench.ddp import timed_train
from devicepipe.bench.results import source_commit
from devicepipe.pipelines import beat_rows

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("DEVICEPIPE_DATA", ROOT.parent / "shared" / "data"))
RESULTS = ROOT / "benchmarks" / "results"


def records(data: Path) -> list[Path]:
    """Every reference-annotated ECG record of the shared data (their .hea files)."""
    found = [data / "mitdb" / "100.hea"]
    found += sorted((data / "cpsc2021").glob("*.hea")) + sorted((data / "cpsc2019").glob("*.hea"))
    missing = [p for p in found if not p.exists()]
    if missing:
        raise SystemExit(f"missing records: {missing[:3]}; set DEVICEPIPE_DATA to the shared data folder")
    return found


def scoring(model_dir: Path, listing: Path, device: str, threads: int, repeats: int) -> dict:
    """Beats per second of a reloaded model's decision_function on the population's own beats."""
    os.environ["DEVICEPIPE_THREADS"] = str(threads)  # the detector takes its thread count from it
    det = dp.load_model(model_dir, device=device)
    assert det.threads_.threads == threads
    rows = []
    for path in listing.read_text().split():
        rec = dp.read_series(path, 0, device=device)
        peaks = dp.ecg_peaks(rec.samples, rec.sampling_rate)
        beats = dp.ecg_segment(rec.samples, peaks, rec.sampling_rate, mode="centered", width=det.width_)
        if beats.matrix.shape[0]:
            rows.append(beat_rows(beats.matrix, det.n_features_in_))  # as `score` prepares them
    x = torch.cat(rows)
    sync = torch.cuda.synchronize if x.device.type == "cuda" else (lambda: None)
    det.decision_function(x)  # warm-up
    sync()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        det.decision_function(x)
        sync()
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    return {
        "device": device,
        "threads": threads,
        "beats": int(x.shape[0]),
        "repeats": repeats,
        "seconds_median": median,
        "seconds_all": times,
        "beats_per_second": x.shape[0] / median,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--nproc", type=int, default=2, help="processes of the distributed run")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path, default=RESULTS / "population_model.json")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        listing = work / "records.txt"
        listing.write_text("\n".join(str(p.with_suffix("")) for p in records(DATA)) + "\n")
        runs = []
        configs = [(1, 1), (1, args.nproc), (args.nproc, 1)] if args.device == "cpu" else [(1, 1), (args.nproc, 1)]
        for nproc, threads in configs:
            out = work / f"p{nproc}t{threads}"
            runs.append(timed_train(listing, out, nproc=nproc, threads=threads, device=args.device, epochs=args.epochs,
                              batch=args.batch_size))  # fmt: skip
        model = work / "p1t1"
        weights = [torch.load(work / f"p{n}t{t}" / MODEL_NAME, weights_only=True)["members"][0] for n, t in configs]
        max_diff = max(float((weights[0][k] - w[k]).abs().max()) for w in weights[1:] for k in weights[0])
        score = [scoring(model, listing, args.device, t, args.repeats) for t in sorted({1, args.nproc})]
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": source_commit(ROOT),  # the code measured ("-dirty" where tracked files differ)
        "machine": {
            "platform": platform.platform(),
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        },
        "records": "MIT-BIH 100, CPSC 2021 (9), CPSC 2019 (25)",
        "training": runs,
        "max_weight_difference_vs_one_process": max_diff,
        "scoring": score,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    base = runs[0]["epoch_seconds_median"]
    lines = [
        f"# Population model: {runs[0]['beats']:,} beats of {runs[0]['recordings']} records",
        "",
        f"{result['date']}, {result['machine']['cores']} cores, {result['machine']['platform']}, torch "
        f"{result['machine']['torch']}, device {args.device}; {args.epochs} epochs, batch {args.batch_size}, seed 0. "
        "Epoch time: median of the epochs after the first.",
        "",
        "| processes | threads each | s per epoch | vs 1 process, 1 thread |",
        "|---|---|---|---|",
    ]
    for r in runs:
        ratio = base / r["epoch_seconds_median"]
        lines.append(
            f"| {r['processes']} | {r['threads_per_process']} | {r['epoch_seconds_median']:.3f} | {ratio:.2f}x |"
        )
    lines += [
        "",
        f"Largest weight difference between the runs after {args.epochs} epochs: {max_diff:.2e}.",
        "",
        "| scoring (reloaded model) | threads | beats | median s | beats per second |",
        "|---|---|---|---|---|",
    ]
    for s in score:
        rate = s["beats_per_second"]
        lines.append(f"| {s['device']} | {s['threads']} | {s['beats']:,} | {s['seconds_median']:.3f} | {rate:,.0f} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
