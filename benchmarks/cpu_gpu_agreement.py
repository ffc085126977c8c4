"""How far apart a detector trained on the CPU and one trained on a GPU score, against how far
float32 rounding alone moves the scores, and how far TF32 would move them.

    python benchmarks/cpu_gpu_agreement.py            # needs a CUDA GPU

The input and settings of ``test_training_on_a_gpu_gives_the_cpu_answers`` (300 beat rows, six of
them planted anomalies, 5 epochs, seed 0), for each scorer:

- ``gpu``: trained on the GPU as devicepipe trains (convolutions in IEEE float32);
- ``rounding``: trained on the CPU on the input changed by 2e-7 of each value (its float32
  rounding), what summation order alone can do;
- ``tf32``: trained on the GPU with cuDNN's and the matrix products' TF32 allowed (a child
  process, the block that turns TF32 off replaced before devicepipe loads).

Each is compared with the CPU's scores: the largest absolute difference in units of the CPU
scores' median absolute deviation, and whether the flags are the same. Results:
``benchmarks/results/cpu_gpu_agreement.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
sys.path.insert(0, str(ROOT / "benchmarks"))
SCORERS = [("reconstruction", "auto"), ("knn", 0.02), ("multiscale", 0.02), ("local", 0.02)]


def allow_tf32() -> None:
    """Replace devicepipe's IEEE float32 block by one that allows TF32 (before devicepipe loads)."""
    import devicepipe.core.device as device

    @contextmanager
    def tf32():
        torch.backends.cudnn.conv.fp32_precision = "tf32"
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        yield

    device.full_float32 = tf32


def fits(devices_and_inputs: dict[str, tuple[str, bool]]) -> dict[str, dict[str, list]]:
    """Scores and flags per scorer for each named (device, perturbed input) run."""
    from test_detector import beats, small

    x = beats(300)
    x[::50] += 3 * np.sin(np.linspace(0, 20, x.shape[1]))
    perturbed = (x * (1 + np.random.default_rng(1).normal(0, 2e-7, x.shape))).astype(np.float32)
    out: dict[str, dict[str, list]] = {}
    for scorer, contamination in SCORERS:
        for name, (dev, changed) in devices_and_inputs.items():
            det = small(epochs=5, contamination=contamination, device=dev, scorer=scorer)
            det.fit(perturbed if changed else x)
            out.setdefault(scorer, {})[name] = [det.decision_scores_.tolist(), det.labels_.tolist()]
    return out


def compare(runs: dict[str, list]) -> dict[str, dict[str, float | bool]]:
    cpu, labels = np.asarray(runs["cpu"][0]), runs["cpu"][1]
    spread = float(np.median(np.abs(cpu - np.median(cpu))))
    rows = {}
    for name, (scores, flags) in runs.items():
        if name != "cpu":
            d = np.abs(np.asarray(scores) - cpu)
            rows[name] = {
                "max_abs": float(d.max()),
                "max_over_spread": float(d.max() / spread),
                "same_flags": flags == labels,
            }
    return {"spread": spread, **rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf32-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu_gpu_agreement.json")
    args = ap.parse_args()
    if args.tf32_child:
        allow_tf32()
        json.dump(fits({"cpu": ("cpu", False), "tf32": ("cuda", False)}), sys.stdout)
        return 0
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    from results_io import machine

    runs = fits({"cpu": ("cpu", False), "gpu": ("cuda", False), "rounding": ("cpu", True)})
    child = subprocess.run([sys.executable, __file__, "--tf32-child"], capture_output=True, text=True, check=True)
    for scorer, both in json.loads(child.stdout).items():
        assert both["cpu"] == runs[scorer]["cpu"], "the CPU run differs between processes"
        runs[scorer]["tf32"] = both["tf32"]
    result = {
        **machine(),
        "gpu": torch.cuda.get_device_name(),
        "scorers": {s: compare(r) for s, r in runs.items()},
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        "# A detector trained on the CPU and on a GPU: how far apart they score",
        "",
        f"{result['date']}, commit {result.get('commit')}, {result['gpu']}; the largest score difference from the "
        "CPU's, in units of the CPU scores' median absolute deviation (spread), and whether the flags are equal.",
        "",
        "| scorer | spread | GPU (IEEE float32) | CPU, input changed by its rounding | GPU with TF32 |",
        "|---|---|---|---|---|",
    ]
    for scorer, row in result["scorers"].items():
        cells = [f"{row[k]['max_over_spread']:.2e} ({'same' if row[k]['same_flags'] else 'other'} flags)"
                 for k in ("gpu", "rounding", "tf32")]  # fmt: skip
        lines.append(f"| {scorer} | {row['spread']:.3g} | " + " | ".join(cells) + " |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
