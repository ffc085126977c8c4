"""What stopping the VAE's training sooner does to its outputs: epochs, time and the codes' map.

    python benchmarks/early_stop_codes.py        # three recordings, four settings (about 8 min on 2 cores)

``ecg`` and ``demo`` train their VAE until the validation loss has not improved by 0.1 % for 20
epochs (at most 200). Its outputs are its figures (the latent map, generated beats, the
reconstructions); no class, event or flag uses it. This runs ``ecg`` on the demo's recording,
on MIT-BIH 100 and on MIT-BIH 200 (the shared copy, V exact) with that default, with the same
default at another seed (how far two equally trained models' maps differ anyway) and with two
sooner stops (no 1 % improvement for 10 epochs; for 5), and compares each model's codes with
the default's: the Procrustes disparity of the latent means (0: the same map up to rotation,
scale and shift; 1: unrelated), and how much of the map its second dimension holds (the second
singular value of the centred codes over the first: near 0, a line; the default's maps spread
in both).

Results: ``benchmarks/results/early_stop_codes.{json,md}``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from results_io import machine, parser, table, write_results
from scipy.spatial import procrustes

from devicepipe.learning.learn import LearnSettings
from devicepipe.pipelines import run_demo, run_ecg

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("DEVICEPIPE_DATA", ROOT.parent / "shared" / "data"))
SETTINGS: dict[str, dict[str, Any]] = {
    "default (20 epochs, 0.1 %)": {},
    "default, seed 1": {"seed": 1},
    "10 epochs, 1 %": {"patience": 10, "min_improvement": 1e-2},
    "5 epochs, 1 %": {"patience": 5, "min_improvement": 1e-2},
}


def _codes(out: Path) -> np.ndarray:
    """The latent means ``(n_beats, latent)`` of a run's ``embeddings.parquet``."""
    table_ = pq.read_table(out / "embeddings.parquet")
    return np.stack([table_.column(c).to_numpy() for c in table_.column_names if c.startswith("z")], axis=1)


def _second_dimension(codes: np.ndarray) -> float:
    """The second singular value of the centred codes over the first."""
    s = np.linalg.svd(codes - codes.mean(0), compute_uv=False)
    return float(s[1] / s[0])


def main() -> None:
    args = parser(__doc__).parse_args()
    work = Path(tempfile.mkdtemp(prefix="early_stop_"))
    run_demo(work / "demo", device="cpu", epochs=1)  # its recording and truth, as the demo simulates them
    recordings = {
        "demo": (work / "demo" / "input" / "ecg.parquet", work / "demo" / "input" / "ecg.truth.csv"),
        "MIT-BIH 100": (DATA / "mitdb" / "100", DATA / "mitdb" / "100.atr"),
        "MIT-BIH 200": (DATA / "mitdb_v" / "200", DATA / "mitdb_v" / "200_beats.csv"),
    }
    result: dict[str, Any] = {**machine(), "runs": []}
    rows = []
    for name, (source, reference) in recordings.items():
        base: np.ndarray | None = None
        for label, changes in SETTINGS.items():
            out = work / f"{name.replace(' ', '_')}_{len(result['runs'])}"
            start = time.perf_counter()
            run_ecg(source, out, device="cpu", settings=LearnSettings(**changes), reference=reference)
            wall = time.perf_counter() - start
            summary = json.loads((out / "summary.json").read_text())
            codes = _codes(out)
            base = codes if base is None else base
            run = {
                "recording": name,
                "settings": label,
                "epochs": summary["epochs"]["run"][0],
                "kept": summary["epochs"]["kept"][0],
                "train_s": summary["seconds"]["train"],
                "wall_s": wall,
                "val_loss": summary["final_loss"]["val"][0],
                "disparity": float(procrustes(base, codes)[2]),
                "second_dimension": _second_dimension(codes),
            }
            result["runs"].append(run)
            figures = [f"{run['train_s']:.1f}", f"{run['wall_s']:.1f}", f"{run['val_loss']:.4f}"]
            figures += [f"{run['disparity']:.3f}", f"{run['second_dimension']:.3f}"]
            rows.append([name, label, run["epochs"], run["kept"], *figures])
    header = ["recording", "stop", "epochs", "kept", "train (s)", "ecg (s)", "val loss", "disparity", "2nd dim"]
    lines = [
        f"# The VAE stopped sooner ({result['date']}, commit {result['commit']}, {result['cpu']}, "
        f"torch threads {result['threads']})",
        "",
        "Disparity: Procrustes, of each run's latent means against the default run's on the same recording. "
        "2nd dim: the second singular value of the centred codes over the first.",
        "",
        *table(header, rows),
        "",
    ]
    write_results(args.out, "early_stop_codes", result, "\n".join(lines))


if __name__ == "__main__":
    main()
