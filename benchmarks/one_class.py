"""One-class anomaly detection on data the models were not tuned on: our detector against simple baselines.

    python benchmarks/one_class.py                 # every task, 3 seeds (a few minutes on 2 cores)
    python benchmarks/one_class.py --quick         # one seed, two tasks: checks that it runs

Tasks: each class of the five UCR test sets in ``../shared/data/ucr/`` in turn is "normal"; a
seeded, stratified 50/50 split; every model trains on the normal half only and scores the
other half of every class; ROC AUC normal vs the rest; seeds 0, 1, 2. ECG5000: trained on the
normal rows of its TRAIN file, scored on its TEST file (one split; the seeds vary the models).

Every model sees the same rows, standardised by the training normals' mean and standard
deviation (one for every value, as the detector's ``scaling="standard"`` does). Baselines:
PCA reconstruction error (components explaining 90 % of the training variance), scikit-learn's
IsolationForest (200 trees), the distance to the nearest training row (1-NN) and the mean
distance to the 5 nearest (5-NN), and scikit-learn's OneClassSVM (RBF, gamma "scale", nu 0.1).
Ours: :class:`devicepipe.BeatAnomalyDetector` with each ``scorer`` it has, at its defaults
(``local``, the default scorer: at each resolution the largest of two robust z-scores, the
distance to the ``k = floor(0.01 x training rows) + 1`` nearest rows and the local linear
reconstruction error from the sqrt(training rows) nearest, at most 32).

Results: ``benchmarks/results/one_class.{json,md}`` (mean and spread of the AUC over seeds, and
seconds per fit and score).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from sklearn.decomposition import PCA
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import NearestNeighbors
from sklearn.svm import OneClassSVM

import devicepipe as dp
from devicepipe.bench.results import source_commit

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("DEVICEPIPE_DATA", ROOT.parent / "shared" / "data"))
RESULTS = ROOT / "benchmarks" / "results"
UCR = {
    "CBF": "CBF_TEST.tsv",
    "GunPoint": "GunPoint_TEST.tsv",
    "ItalyPowerDemand": "ItalyPowerDemand_TEST.txt",
    "MoteStrain": "MoteStrain_TEST.tsv",
    "SonyAIBORobotSurface1": "SonyAIBORobotSurface1_TEST.tsv",
}
Split = tuple[np.ndarray, np.ndarray, np.ndarray]  # train normals, test rows, test labels (1 = anomaly)


def load_ucr(name: str) -> tuple[np.ndarray, np.ndarray]:
    table = np.loadtxt(DATA / "ucr" / UCR[name], delimiter=None, dtype=np.float64)
    return table[:, 1:].astype(np.float32), table[:, 0].astype(int)


def stratified_half(labels: np.ndarray, seed: int) -> np.ndarray:
    """A boolean mask of the first half of a seeded, stratified 50/50 split."""
    rng = np.random.default_rng(seed)
    first = np.zeros(labels.size, bool)
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        first[idx[: idx.size // 2]] = True
    return first


def ucr_split(x: np.ndarray, y: np.ndarray, normal: int, seed: int) -> Split:
    first = stratified_half(y, seed)
    return x[first & (y == normal)], x[~first], (y[~first] != normal).astype(int)


def standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, std = float(train.mean()), float(train.std()) or 1.0
    return (train - mean) / std, (test - mean) / std


def pca_error(train: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    pca = PCA(n_components=0.9, svd_solver="full", random_state=seed).fit(train)
    recon = pca.inverse_transform(pca.transform(test))
    return ((test - recon) ** 2).mean(1)


def iforest(train: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    return -IsolationForest(n_estimators=200, random_state=seed).fit(train).score_samples(test)


def knn(k: int) -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
    def score(train: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
        distances, _ = NearestNeighbors(n_neighbors=min(k, len(train))).fit(train).kneighbors(test)
        return distances.mean(1)

    return score


def ocsvm(train: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    return -OneClassSVM(kernel="rbf", gamma="scale", nu=0.1).fit(train).score_samples(test)


def ours(**params: object) -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
    def score(train: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
        det = dp.BeatAnomalyDetector(device="cpu", seed=seed, scaling="none", **params).fit(train)
        return det.decision_function(test)

    return score


def models(scorers: list[str]) -> dict[str, Callable[[np.ndarray, np.ndarray, int], np.ndarray]]:
    found = {
        "PCA error": pca_error,
        "IsolationForest": iforest,
        "1-NN": knn(1),
        "5-NN": knn(5),
        "OneClassSVM": ocsvm,
    }
    for scorer in scorers:
        found[f"ours ({scorer})"] = ours(scorer=scorer)
    return found


BASELINES = ("PCA error", "IsolationForest", "1-NN", "5-NN")  # the target: the best of these minus 0.01


def tasks(quick: bool) -> list[tuple[str, Callable[[int], Split]]]:
    found: list[tuple[str, Callable[[int], Split]]] = []
    for name in UCR:
        x, y = load_ucr(name)
        for c in np.unique(y):
            found.append((f"{name} ({c})", lambda seed, x=x, y=y, c=c: ucr_split(x, y, c, seed)))
    from evaluation import load_ecg5000  # noqa: PLC0415 - the harness beside this script

    x_train, y_train, x_test, y_test = load_ecg5000(DATA / "ecg5000")
    found.append(("ECG5000 (1)", lambda seed: (x_train[y_train == 1], x_test, (y_test != 1).astype(int))))
    return found[:1] + found[-1:] if quick else found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--scorers",
        default="local,multiscale,knn,reconstruction,combined",
        help="comma-separated scorers of the detector",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "one_class.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    seeds = [0] if args.quick else [0, 1, 2]
    chosen = models(args.scorers.split(","))
    rows = []
    for task, split in tasks(args.quick):
        per_model: dict[str, dict[str, object]] = {}
        for name, model in chosen.items():
            aucs, seconds = [], []
            for seed in seeds:
                train, test, labels = split(seed)
                train, test = standardise(train, test)
                started = time.perf_counter()
                scores = model(train, test, seed)
                seconds.append(time.perf_counter() - started)
                aucs.append(float(roc_auc_score(labels, scores)))
            per_model[name] = {
                "auc_mean": statistics.fmean(aucs),
                "auc_min": min(aucs),
                "auc_max": max(aucs),
                "aucs": aucs,
                "seconds_median": statistics.median(seconds),
            }
        train, test, labels = split(0)
        rows.append({"task": task, "n_train": len(train), "n_test": len(test), "models": per_model})
        print(task, {k: round(v["auc_mean"], 3) for k, v in per_model.items()}, flush=True)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": source_commit(),
        "machine": {"platform": platform.platform(), "cores": os.cpu_count(), "torch": torch.__version__},
        "threads": 1,
        "seeds": seeds,
        "tasks": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    names = list(chosen)
    lines = [
        "# One-class tasks: mean ROC AUC over seeds (min-max)",
        "",
        f"{result['date']}, commit {result['commit']}, {result['machine']['platform']}, "
        f"{result['machine']['cores']} cores, 1 torch thread, "
        f"seeds {seeds}. Target: each of ours at least the best of {', '.join(BASELINES)} minus 0.01. "
        f"The detector's default scorer is {dp.BeatAnomalyDetector().scorer}.",
        "",
        "| task | train | test | " + " | ".join(names) + " | best baseline | met |",
        "|---|---|---|" + "---|" * len(names) + "---|---|",
    ]
    for r in rows:
        m = r["models"]
        best = max(m[b]["auc_mean"] for b in BASELINES)
        ours_names = [n for n in names if n.startswith("ours")]
        met = ", ".join("yes" if m[n]["auc_mean"] >= best - 0.01 else "no" for n in ours_names)
        cells = [f"{m[n]['auc_mean']:.3f} ({m[n]['auc_min']:.2f}-{m[n]['auc_max']:.2f})" for n in names]
        lines.append(
            f"| {r['task']} | {r['n_train']} | {r['n_test']} | " + " | ".join(cells) + f" | {best:.3f} | {met} |"
        )
    lines += ["", "Seconds per fit and score (median over seeds):", ""]
    lines.append("| task | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for r in rows:
        lines.append(f"| {r['task']} | " + " | ".join(f"{r['models'][n]['seconds_median']:.2f}" for n in names) + " |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
