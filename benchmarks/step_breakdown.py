"""Where a training step's time goes: forward, backward and the optimizer, with the foreach and the fused Adam.

For each default model (the load MLP on 64 windows, the ECG VAE on 256 beats), one thread,
median of many steps after a warm-up, the two optimizers interleaved in one process.

    python benchmarks/step_breakdown.py [--steps 400] [--out benchmarks/results]
"""

from __future__ import annotations

import statistics
import time

import torch
from results_io import machine, parser, table, write_results  # beside this script

from devicepipe.models import LightVAE, LightVAEConfig, MLPAutoencoder, MLPAutoencoderConfig

CASES = [
    ("load MLP 24-32-8, batch 64", lambda: MLPAutoencoder(MLPAutoencoderConfig(24, 32, 8)), 64, 24),
    ("ECG VAE width 256, batch 256", lambda: LightVAE(LightVAEConfig(256, 2)), 256, 256),
]
PARTS = ("forward", "backward", "optimizer", "step")


def _times(model: torch.nn.Module, x: torch.Tensor, fused: bool, steps: int) -> dict[str, list[float]]:
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=fused or None)
    noise = None if model.noise_dim is None else torch.zeros(x.shape[0], model.noise_dim)
    out: dict[str, list[float]] = {p: [] for p in PARTS}
    for i in range(steps + 20):
        t0 = time.perf_counter()
        loss = model.losses(x, noise).mean()
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if i >= 20:
            for part, seconds in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
                out[part].append(seconds)
    return out


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__)
    options.add_argument("--steps", type=int, default=400)
    args = options.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for name, make, batch, width in CASES:
        torch.manual_seed(0)
        model, x = make(), torch.rand(batch, width)
        runs: dict[str, dict[str, list[float]]] = {"foreach": {p: [] for p in PARTS}, "fused": {p: [] for p in PARTS}}
        for _ in range(4):  # interleave the optimizers
            for kind in ("foreach", "fused"):
                for part, values in _times(model, x, kind == "fused", args.steps // 4).items():
                    runs[kind][part] += values
        for kind, parts in runs.items():
            rows.append(
                {"case": name, "optimizer": kind, **{f"{p}_ms": statistics.median(v) * 1e3 for p, v in parts.items()}}
            )
    result = {**machine(), "steps": args.steps, "rows": rows}
    lines = [
        "# A training step, part by part",
        "",
        f"One thread, median of {args.steps} steps per optimizer after a warm-up, interleaved; {result['cpu']};"
        f" torch {result['torch']}; {result['date'][:10]}. Produced by `python benchmarks/step_breakdown.py`.",
        "",
    ]
    lines += table(
        ["model", "Adam", "forward (ms)", "backward (ms)", "optimizer (ms)", "whole step (ms)"],
        [
            [r["case"], r["optimizer"], *(f"{r[f'{p}_ms']:.3f}" for p in ("forward", "backward", "optimizer", "step"))]
            for r in rows
        ],
    )
    write_results(args.out, "step_breakdown", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
