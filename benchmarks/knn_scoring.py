"""How long the nearest-neighbour scorers take on many beats: 100,000 rows against 20,000 training rows.

    python benchmarks/knn_scoring.py            # CPU at 1 and 2 threads; CUDA too when there is one
    python benchmarks/knn_scoring.py --scorers local --threads 2 --out knn_scoring_local

The detector keeps up to 20,000 training rows (``reference_rows``) and scores a row by its mean
distance to its k nearest of them (k = floor(0.01 x 20,000) + 1 = 201 at the defaults):
``torch.cdist`` and ``topk`` in blocks of about 32 M distances, on the detector's device. The
``multiscale`` scorer does that at 256, 128, 64, 32 and 16 samples per row; ``knn`` at 256
only; the default ``local`` takes, at 256 down to 8 samples, the local linear reconstruction
error from the 32 nearest rows past the k - 1 nearest (the 201st to the 232nd). The
rows here are smooth bumps with noise, 256 samples wide like the ECG pipeline's beats (the
time does not depend on what they hold). Each setting: one warm-up, then the median of 3
timed calls of ``decision_function`` (synchronised on a GPU). Every result is checked against
a float64 computation of the same distances on a sample of 200 rows (for ``multiscale`` and
``local``, with the detector's own calibration of each resolution; ``local``'s reconstruction in
NumPy, row by row).

Results: ``benchmarks/results/knn_scoring.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import devicepipe as dp
from devicepipe.bench.results import source_commit

RESULTS = Path(__file__).resolve().parent / "results"
TRAIN, SCORE, WIDTH, REPEATS = 20_000, 100_000, 256, 3


def rows(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, WIDTH)
    centre = 0.35 + rng.normal(0, 0.02, (n, 1))
    return (np.exp(-(((t - centre) / 0.03) ** 2)) + rng.normal(0, 0.05, (n, WIDTH))).astype(np.float32)


def check(det: dp.BeatAnomalyDetector, train: torch.Tensor, x: torch.Tensor, scores: torch.Tensor) -> float:
    """The largest relative difference from the same scores in float64, on 200 rows: every value
    standardised by the training rows' mean and deviation, the mean distance to the k nearest
    (``multiscale``: at each resolution, averaged down by pairs, as a robust z-score with the
    detector's calibration, the largest)."""
    t = train.double()
    mean, std = t.mean(), t.std(unbiased=False)
    pick = torch.arange(0, x.shape[0], x.shape[0] // 200)[:200]
    rows, ref = (x[pick].double() - mean) / std, (t - mean) / std
    k = det.neighbours_
    if det.scorer == "knn":
        expected = torch.cdist(rows, ref).topk(k, dim=1, largest=False).values.mean(1)
    else:
        z = []
        floor = 8 if det.scorer == "local" else 16
        while True:
            if det.scorer == "local":
                median, scale = det.calibration_[f"local{ref.shape[1]}"]
                d = torch.from_numpy(local_residuals(rows.numpy(), ref.numpy(), skip=k - 1))
            else:
                d = torch.cdist(rows, ref).topk(k, dim=1, largest=False).values.mean(1)
                median, scale = det.calibration_[f"knn{ref.shape[1]}"]
            z.append((d.log() - median) / scale)
            if ref.shape[1] < 2 * floor:
                break
            rows, ref = (v.reshape(v.shape[0], -1, 2).mean(-1) for v in (rows, ref))
        expected = torch.stack(z).amax(0)
    got = scores[pick].double().cpu()
    return float(((got - expected).abs() / expected.abs().clamp_min(1.0)).max())


def local_residuals(rows: np.ndarray, ref: np.ndarray, k: int = 32, ridge: float = 0.03, skip: int = 0) -> np.ndarray:
    """The local linear reconstruction error of each row from its ``k`` nearest reference rows past
    the ``skip`` nearest, one row at a time: ``(G + ridge trace(G) I) v = 1``, ``v`` scaled to sum
    to one, ``|v^T D|``."""
    out = np.empty(len(rows))
    for i, row in enumerate(rows):
        near = np.argsort(((ref - row) ** 2).sum(1), kind="stable")[skip : skip + k]
        diff = ref[near] - row
        gram = diff @ diff.T
        v = np.linalg.solve(gram + ridge * np.trace(gram) * np.eye(k), np.ones(k))
        out[i] = np.linalg.norm((v / v.sum()) @ diff)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scorers", default="local,multiscale,knn")
    ap.add_argument("--threads", default="1,2", help="CPU thread counts, comma-separated")
    ap.add_argument("--out", default="knn_scoring", help="results name under benchmarks/results/")
    args = ap.parse_args(argv)
    train, new = torch.from_numpy(rows(TRAIN, 0)), torch.from_numpy(rows(SCORE, 1))
    devices = [("cpu", int(t)) for t in args.threads.split(",")]
    devices += [("cuda", None)] if torch.cuda.is_available() else []
    settings = [(d, t, scorer) for scorer in args.scorers.split(",") for d, t in devices]
    out = []
    for device, threads, scorer in settings:
        if threads is not None:
            torch.set_num_threads(threads)
        det = dp.BeatAnomalyDetector(device=device, epochs=1, seed=0, threads=threads, scorer=scorer).fit(train)
        x = new.to(det.device_)
        det.decision_function(x[:2000])  # warm-up
        seconds = []
        for _ in range(REPEATS):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            scores = det.decision_function(x)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
        worst = check(det, train, new, scores)
        median = statistics.median(seconds)
        out.append(
            {
                "scorer": scorer,
                "device": device,
                "threads": threads,
                "training_rows": TRAIN,
                "rows": SCORE,
                "neighbours": det.neighbours_,
                "seconds": seconds,
                "median_s": median,
                "rows_per_s": SCORE / median,
                "max_relative_difference_from_float64": worst,
            }
        )
        print(out[-1], flush=True)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "commit": source_commit(RESULTS.parent.parent),  # "-dirty" where tracked files differ
        "machine": {"platform": platform.platform(), "cores": os.cpu_count(), "torch": torch.__version__},
        "results": out,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# The nearest-neighbour scorers on {SCORE:,} rows against {TRAIN:,} training rows ({result['date']} UTC)",
        "",
        f"{result['machine']['platform']}, {result['machine']['cores']} cores, torch {result['machine']['torch']}; "
        f"median of {REPEATS} after a warm-up.",
        "",
        "| scorer | device | threads | k | median s | rows per second | largest difference from float64 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in out:
        lines.append(
            f"| {r['scorer']} | {r['device']} | {r['threads'] or '-'} | {r['neighbours']} | {r['median_s']:.2f} "
            f"| {r['rows_per_s']:,.0f} | {r['max_relative_difference_from_float64']:.1e} |"
        )
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
