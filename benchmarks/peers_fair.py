"""Beat detection against sleepecg, fair by construction: interleaved, one thread each, real and simulated inputs.

    python benchmarks/peers_fair.py [--data DIR] [--repeats 15]    # about 2 min on 2 cores

Each comparison runs sleepecg's ``detect_heartbeats`` and our ``ecg_peaks`` once per repeat, in an
order rotated from one repeat to the next (``devicepipe.bench.paired``), after one warm-up call
each; the ratio is taken within each repeat (sleepecg's time over ours) and reported as the
median with a bootstrap 95 % interval, whose lower bound is the figure to quote. Raw times are
kept. Both sides' beats are scored against the truth on every input (F1, 150 ms, the first and
last 0.5 s not scored), so a fast wrong answer shows.

Inputs: simulated ECGs at 250 Hz (the first 10 k, 100 k, 1 M and 20 M samples of one 22-hour
recording; truth: the simulator's R peaks) and the shared real records (truth: their reference
annotations): MIT-BIH 100 whole (650,000 samples at 360 Hz), the nine CPSC 2021 records one call
each, and the 25 CPSC 2019 records (10 s at 500 Hz) one call each, and again with ours in one
batched call on the 25 stacked (sleepecg has no batched call: a call each).

One thread each: torch at one thread, OpenMP's wait policy passive, and transparent huge pages for
torch's large buffers (``THP_MEM_ALLOC_ENABLE=1``), both set before torch starts, as the
``devicepipe`` command sets them; NumPy, whose arrays sleepecg works in, asks for huge pages by
itself. Without them a 20 M-sample call of ours took 25-44 thousand page faults, and with them
2-3 thousand.
Same cores: on the 20 M-sample input and on the CPSC 2019 records (a call each and batched),
ours at two threads against sleepecg in two worker processes (forked before timing, each taking
half of the work; the halves of the long signal overlap by 2 s and are joined at the middle).

Results: ``benchmarks/results/peers_fair.{json,md}``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its OpenMP runtime
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # (read once, at torch's first allocation)

import multiprocessing as mp  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import sleepecg  # noqa: E402
import torch  # noqa: E402
from evaluation import detection_records  # noqa: E402
from results_io import heading, machine, parser, table, write_results  # noqa: E402

import devicepipe as dp  # noqa: E402
from devicepipe.bench.paired import Contender, paired  # noqa: E402
from devicepipe.ecg import ecg_peaks, evaluate_beats  # noqa: E402
from devicepipe.io import read_beat_annotations, read_series  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("DEVICEPIPE_DATA", ROOT.parent / "shared" / "data"))
SIM_HZ = 250.0
SIM_SIZES = [10_000, 100_000, 1_000_000, 20_000_000]
OVERLAP_S = 2.0
#: The CPSC 2019 records stacked into one call of ours (sleepecg: a call each).
BATCHED = "CPSC 2019, 10 s at 500 Hz (ours: one batched call)"

#: One input: its name, and its recordings as (signal float32 (time,), Hz, true R peaks in samples).
Input = tuple[str, list[tuple[np.ndarray, float, np.ndarray]]]

_SHARED: dict[str, Any] = {}  # what forked peer processes read (set before the pool starts)


def simulated_inputs() -> list[Input]:
    """The first ``SIM_SIZES`` samples of one simulated 22-hour ECG at 250 Hz."""
    sim = dp.simulate_ecg(max(SIM_SIZES) / SIM_HZ, SIM_HZ, seed=0)
    signal, truth = sim.signal.numpy(), sim.r_peaks.numpy()
    return [(f"simulated, {n:,} samples", [(signal[:n], SIM_HZ, truth[truth < n])]) for n in SIM_SIZES]


def real_inputs(data: Path) -> list[Input]:
    """MIT-BIH 100 whole, the CPSC 2021 records and the CPSC 2019 records, as read, with their references."""
    groups: dict[str, list[tuple[np.ndarray, float, np.ndarray]]] = {}
    for group, _name, path in detection_records(data):
        rec = read_series(path, channel=0, device="cpu")
        ref = read_beat_annotations(path)
        signal = rec.samples.numpy().astype(np.float32)
        groups.setdefault(group, []).append((signal, rec.sampling_rate, np.asarray(ref.samples)))
    names = {"mitdb": "MIT-BIH 100 (one call)", "cpsc2021": "CPSC 2021 (a call per record)"}
    names["cpsc2019"] = "CPSC 2019, 10 s at 500 Hz (a call per record)"
    return [(names[g], recs) for g, recs in groups.items() if g in names]


def _f1(recordings: list[tuple[np.ndarray, float, np.ndarray]], found: list[Any]) -> float:
    """F1 of ``found`` (one array of R peaks per recording) against the truth, pooled."""
    tp = fp = fn = 0
    for (signal, fs, truth), peaks in zip(recordings, found, strict=True):
        got = np.asarray(peaks.numpy() if isinstance(peaks, torch.Tensor) else peaks)
        score = evaluate_beats(truth, got, fs, n_samples=signal.size)
        tp, fp, fn = tp + score.tp, fp + score.fp, fn + score.fn
    return 2 * tp / max(2 * tp + fp + fn, 1)


def _peer_part(task: tuple[int, int, int]) -> np.ndarray:
    """sleepecg on part of a shared recording, in a worker process: (recording, first, end) samples."""
    i, a, b = task
    signal, fs, _ = _SHARED["recordings"][i]
    return np.asarray(sleepecg.detect_heartbeats(signal[a:b].astype(np.float64), fs)) + a


def _peer_tasks(recordings: list[tuple[np.ndarray, float, np.ndarray]]) -> list[list[tuple[int, int, int]]]:
    """Two workers' shares: half the recordings each, or, for one recording, its two halves
    overlapping by ``OVERLAP_S``."""
    if len(recordings) > 1:
        every = [(i, 0, r[0].size) for i, r in enumerate(recordings)]
        return [every[0::2], every[1::2]]
    signal, fs, _ = recordings[0]
    mid, over = signal.size // 2, int(OVERLAP_S * fs)
    return [[(0, 0, min(signal.size, mid + over))], [(0, max(0, mid - over), signal.size)]]


def _peer_in_two(pool: Any, recordings: list[tuple[np.ndarray, float, np.ndarray]]) -> list[np.ndarray]:
    """sleepecg in two processes; the beats of each recording, joined at the middle where it was split."""
    tasks = _peer_tasks(recordings)
    parts = pool.map(_peer_share, tasks)
    if len(recordings) > 1:
        found: list[np.ndarray] = [np.empty(0)] * len(recordings)
        for share, got in zip(tasks, parts, strict=True):
            for (i, _a, _b), peaks in zip(share, got, strict=True):
                found[i] = peaks
        return found
    mid = recordings[0][0].size // 2
    first, second = parts[0][0], parts[1][0]
    return [np.concatenate([first[first < mid], second[second >= mid]])]


def _peer_share(share: list[tuple[int, int, int]]) -> list[np.ndarray]:
    return [_peer_part(task) for task in share]


def compare(
    name: str,
    recordings: list[tuple[np.ndarray, float, np.ndarray]],
    repeats: int,
    pool: Any = None,
    *,
    batched: bool = False,
) -> dict[str, Any]:
    """One interleaved comparison; with ``pool``, the same-cores one (ours at two threads);
    ``batched``: ours in one call on the recordings stacked ``(recordings, time)`` (equal
    lengths and rates), sleepecg a call each as always."""
    as64 = [(s.astype(np.float64), fs) for s, fs, _ in recordings]
    host = [(torch.from_numpy(s), fs) for s, fs, _ in recordings]
    stacked = torch.from_numpy(np.stack([s for s, _, _ in recordings])) if batched else None
    ours: Callable[[], Any] = (
        (lambda: ecg_peaks(stacked, recordings[0][1]))
        if stacked is not None
        else (lambda: [ecg_peaks(x, fs) for x, fs in host])
    )
    f1: dict[str, float] = {}

    def check(res: dict[str, Any]) -> None:
        f1.update({label: round(_f1(recordings, found), 4) for label, found in res.items()})

    peer: Callable[[], Any] = (
        (lambda: [sleepecg.detect_heartbeats(s, fs) for s, fs in as64])
        if pool is None
        else (lambda: _peer_in_two(pool, recordings))
    )
    record = paired(
        [
            Contender("peer", "sleepecg" if pool is None else "sleepecg, 2 processes", peer),
            Contender("ours", "ecg_peaks, one batched call" if batched else "ecg_peaks", ours),
        ],
        repeats=repeats,
        threads=1 if pool is None else 2,
        check=check,
    )
    ratio = record["ratios"][0]
    return {
        "input": name,
        "recordings": len(recordings),
        "samples": int(sum(s.size for s, _, _ in recordings)),
        "same_cores": pool is not None,
        "batched": batched,
        "f1": f1,
        "ratio_median": round(ratio["median"], 3),
        "ratio_ci95": [round(v, 3) for v in ratio["ci95"]],
        **record,
    }


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--data", type=Path, default=DATA)
    options.add_argument("--repeats", type=int, default=15)
    args = options.parse_args()
    torch.set_num_threads(1)
    inputs = simulated_inputs()
    if (args.data / "mitdb" / "100.hea").exists():
        inputs += real_inputs(args.data)
    rows = [compare(name, recs, args.repeats) for name, recs in inputs]
    short = [(name, recs) for name, recs in inputs if name.startswith("CPSC 2019")]
    rows += [compare(BATCHED, recs, args.repeats, batched=True) for _, recs in short]
    both = [(name, recs, False) for name, recs in inputs if name.startswith(("simulated, 20,000,000", "CPSC 2019"))]
    for name, recs, batched in both + [(BATCHED, recs, True) for _, recs in short]:
        _SHARED["recordings"] = recs
        with mp.get_context("fork").Pool(2) as pool:
            pool.map(_peer_share, _peer_tasks(recs))  # started and warm before timing
            rows.append(compare(name, recs, args.repeats, pool, batched=batched))
    result = {**machine(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
              "huge_pages": os.environ.get("THP_MEM_ALLOC_ENABLE"), "rows": rows}  # fmt: skip
    lines = [
        heading(
            "Beat detection against sleepecg, interleaved",
            result,
            result["cpu"],
            f"OMP_WAIT_POLICY={result['omp_wait_policy']}",
            f"THP_MEM_ALLOC_ENABLE={result['huge_pages']}",
        ),
        "",
        f"{args.repeats} repeats in rotated order after a warm-up; ratio = sleepecg's time / ours within a "
        "repeat, median and bootstrap 95 % interval (quote the lower bound); F1 of each side against the truth.",
        "",
        *table(
            ["input", "samples", "cores", "sleepecg (ms)", "ours (ms)", "ratio", "95 % interval", "F1 sleepecg / ours"],
            [
                [r["input"], f"{r['samples']:,}", "2 (2 processes / 2 threads)" if r["same_cores"] else "1"]
                + [f"{1000 * c['median_s']:.3g}" for c in r["contenders"]]
                + [f"{r['ratio_median']:.2f}x", f"{r['ratio_ci95'][0]:.2f}-{r['ratio_ci95'][1]:.2f}"]
                + [" / ".join(f"{v:.4f}" for v in r["f1"].values())]
                for r in rows
            ],
        ),
    ]
    write_results(args.out, "peers_fair", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
