"""OpenMP's wait policy under load: R-peak detection at 2 threads, idle threads spinning or sleeping.

    python benchmarks/wait_policy.py            # about 4 minutes on 2 cores
    python benchmarks/wait_policy.py --quick    # checks that it runs

Each measurement runs in a fresh process (the policy is read once, when the OpenMP runtime
starts) with ``OMP_WAIT_POLICY`` set to ``ACTIVE`` (idle threads spin), ``PASSIVE`` (they sleep:
what the ``devicepipe`` command sets) or left unset (the runtime's default), torch at 2 threads
(fixed by ``DEVICEPIPE_THREADS``: ``ecg_peaks`` itself would take one below 2 M samples),
timing ``ecg_peaks`` on simulated ECGs of 10 k, 100 k and 1 M samples (warmed up, then
``--repeats`` calls each). Idle, and under a controlled load: two processes that spin on the
2 cores for the whole measurement. The policies alternate in a rotated order, round by round.

Results: ``benchmarks/results/wait_policy.{json,md}`` (medians with every raw time kept).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from results_io import machine, parser, table, write_results

POLICIES = ["ACTIVE", "PASSIVE", "default"]
SIZES = [10_000, 100_000, 1_000_000]

CHILD = """
import json, sys, time, torch
import devicepipe as dp
torch.set_num_threads(2)
sizes, repeats = json.loads(sys.argv[1]), int(sys.argv[2])
out = {}
for n in sizes:
    sim = dp.simulate_ecg(n / 360.0, 360.0, seed=0, device="cpu")
    dp.ecg_peaks(sim.signal, 360.0)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        dp.ecg_peaks(sim.signal, 360.0)
        times.append(time.perf_counter() - t)
    out[n] = times
print(json.dumps(out))
"""


def measure(policy: str, sizes: list[int], repeats: int) -> dict[int, list[float]]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env["DEVICEPIPE_THREADS"] = "2"  # two threads at every size (ecg_peaks would pick one below 2 M samples)
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(sizes), str(repeats)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return {int(k): v for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--quick", action="store_true", help="one round, small sizes, few repeats")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    sizes = SIZES[:2] if args.quick else SIZES
    repeats, rounds = (3, 1) if args.quick else (args.repeats, args.rounds)
    raw: dict[str, dict[str, dict[int, list[float]]]] = {}
    for load in ("idle", "two busy processes"):
        busy = []
        if load != "idle":
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        try:
            for r in range(rounds):
                order = POLICIES[r % 3 :] + POLICIES[: r % 3]
                for policy in order:
                    got = measure(policy, sizes, repeats)
                    slot = raw.setdefault(load, {}).setdefault(policy, {})
                    for n, times in got.items():
                        slot.setdefault(n, []).extend(times)
        finally:
            for b in busy:
                b.kill()
                b.wait()
    rows = []
    for load, by_policy in raw.items():
        for n in sizes:
            med = {pol: statistics.median(by_policy[pol][n]) for pol in POLICIES}
            rows.append(
                [load, f"{n:,}"]
                + [f"{1000 * med[pol]:.2f}" for pol in POLICIES]
                + [f"{med['ACTIVE'] / med['PASSIVE']:.2f}x"]
            )
    result = {**machine(), "threads": 2, "repeats": repeats, "rounds": rounds, "raw": raw}
    lines = [
        f"# OpenMP wait policy under load ({result['date'][:10]}, commit {result['commit']}, {result['cpu']}, "
        "torch at 2 threads)",
        "",
        f"Median ms per `ecg_peaks` call over {rounds} rounds of {repeats} calls, each policy in a fresh process.",
        "",
        *table(["load", "samples", "ACTIVE (spin)", "PASSIVE (sleep)", "default", "ACTIVE / PASSIVE"], rows),
    ]
    write_results(args.out, "wait_policy" + ("_quick" if args.quick else ""), result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
