"""Where a second intra-op thread starts to pay on this CPU: training-step time, 1 thread against all.

Times one Adam step (forward, backward, update) of the project's models at several sizes and
batch sizes, with 1 thread and with every usable core, interleaved in one process (median of
many steps after a warm-up), and prints each case's work in FLOP per step (the quantity the
thread policy in ``devicepipe/threads.py`` decides on) beside the two times.

    python benchmarks/threads_crossover.py [--steps 200] [--out benchmarks/results]
"""

from __future__ import annotations

import statistics
import time

import torch
from results_io import machine, parser, table, write_results  # beside this script

from devicepipe.core.device import usable_cores
from devicepipe.core.threads import ONE_THREAD_BELOW_FLOPS, step_flops
from devicepipe.learning.train import adam
from devicepipe.models import LightVAE, LightVAEConfig, MLPAutoencoder, MLPAutoencoderConfig

CASES = [  # (name, model factory, rows per batch, row width)
    ("MLP 24-32-8 (series default)", lambda: MLPAutoencoder(MLPAutoencoderConfig(24, 32, 8)), 64, 24),
    ("MLP 24-32-8", lambda: MLPAutoencoder(MLPAutoencoderConfig(24, 32, 8)), 1024, 24),
    ("MLP 168-256-16", lambda: MLPAutoencoder(MLPAutoencoderConfig(168, 256, 16)), 64, 168),
    ("MLP 168-256-16", lambda: MLPAutoencoder(MLPAutoencoderConfig(168, 256, 16)), 1024, 168),
    ("MLP 1024-1024-64", lambda: MLPAutoencoder(MLPAutoencoderConfig(1024, 1024, 64)), 256, 1024),
    ("VAE width 64", lambda: LightVAE(LightVAEConfig(64, 2)), 64, 64),
    ("VAE width 128 (ECG5000)", lambda: LightVAE(LightVAEConfig(128, 4)), 64, 128),
    ("VAE width 256", lambda: LightVAE(LightVAEConfig(256, 2)), 64, 256),
    ("VAE width 256 (ecg default)", lambda: LightVAE(LightVAEConfig(256, 2)), 256, 256),
    ("VAE width 256", lambda: LightVAE(LightVAEConfig(256, 2)), 1024, 256),
]


def _step_times(model: torch.nn.Module, x: torch.Tensor, threads: int, steps: int) -> list[float]:
    torch.set_num_threads(threads)
    opt = adam(list(model.parameters()), lr=1e-4)  # the optimizer training uses
    noise = None if model.noise_dim is None else torch.zeros(x.shape[0], model.noise_dim)
    times = []
    for i in range(steps + 10):
        started = time.perf_counter()
        loss = model.losses(x, noise).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= 10:  # warm-up steps are not kept
            times.append(time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__)
    options.add_argument("--steps", type=int, default=200)
    args = options.parse_args(argv)
    cores = usable_cores()
    rows = []
    for name, make, batch, width in CASES:
        torch.manual_seed(0)
        model = make()
        x = torch.rand(batch, width)
        flops = step_flops(model, x)
        one, many = [], []
        for _ in range(3):  # interleave: drift hits both alike
            one += _step_times(model, x, 1, args.steps // 3)
            many += _step_times(model, x, cores, args.steps // 3)
        row = {
            "case": name,
            "batch": batch,
            "step_flops": flops,
            "median_s_1_thread": statistics.median(one),
            f"median_s_{cores}_threads": statistics.median(many),
        }
        row["speedup_of_more_threads"] = row["median_s_1_thread"] / row[f"median_s_{cores}_threads"]
        row["gflops_1_thread"] = flops / row["median_s_1_thread"] / 1e9
        rows.append(row)
        one_ms, many_ms = row["median_s_1_thread"] * 1e3, row[f"median_s_{cores}_threads"] * 1e3
        print(
            f"{name:<30} batch {batch:>5}: {flops / 1e6:9.2f} MFLOP/step; 1 thread {one_ms:8.3f} ms,"
            f" {cores} threads {many_ms:8.3f} ms ({row['speedup_of_more_threads']:.2f}x)",
            flush=True,
        )
    # a dense matmul as this machine's arithmetic ceiling, 1 thread
    torch.set_num_threads(1)
    a, b = torch.rand(1024, 1024), torch.rand(1024, 1024)
    for _ in range(3):
        a @ b
    mm_times = []
    for _ in range(10):
        t0 = time.perf_counter()
        a @ b
        mm_times.append(time.perf_counter() - t0)
    matmul_gflops = 2 * 1024**3 / statistics.median(mm_times) / 1e9
    result = {
        **machine(),
        "steps": args.steps,
        "policy_one_thread_below_flops": ONE_THREAD_BELOW_FLOPS,
        "matmul_1024_gflops_1_thread": matmul_gflops,
        "cases": rows,
    }
    lines = [
        "# Threads: where a second core starts to pay for a training step",
        "",
        f"One Adam step (forward, backward, update), median of {args.steps} steps after a warm-up, 1 thread and"
        f" {cores} threads interleaved; {result['cpu']}; torch {torch.__version__}; {result['date'][:10]}."
        f" A 1024x1024 float32 matmul runs at {matmul_gflops:.1f} GFLOP/s on 1 thread here."
        " Produced by `python benchmarks/threads_crossover.py`.",
        "",
    ]
    lines += table(
        ["model", "batch", "MFLOP/step", "1 thread (ms)", f"{cores} threads (ms)", f"speed-up of {cores}"]
        + ["GFLOP/s, 1 thread"],
        [
            [
                r["case"],
                r["batch"],
                f"{r['step_flops'] / 1e6:.2f}",
                f"{r['median_s_1_thread'] * 1e3:.3f}",
                f"{r[f'median_s_{cores}_threads'] * 1e3:.3f}",
                f"{r['speedup_of_more_threads']:.2f}",
                f"{r['gflops_1_thread']:.2f}",
            ]
            for r in rows
        ],
    )
    lines += ["", f"The policy uses one thread below {ONE_THREAD_BELOW_FLOPS / 1e6:g} MFLOP per step, all cores above."]
    write_results(args.out, "threads_crossover", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
