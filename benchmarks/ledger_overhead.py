"""What counting host-device transfers costs a whole pipeline: ``run_ecg`` with the ledger on and off.

The ledger is a dispatch mode that sees every operator. Pipelines count transfers in every
stage but training (reading, detecting, cutting, scoring, copying back, writing); this
script times the same ``run_ecg`` three ways, interleaved in one process so that the
machine's drift hits each alike:

- ``off``: ``count_transfers=False``;
- ``on``: the pipelines' default (every stage but training);
- ``whole``: the ledger around the whole run, training included (how it was counted before).

It reports the median wall time of each, the ratio to ``off``, and the median seconds of the
train stage (where ``whole`` pays). The target: ``on`` within 3 % of ``off``.

    python benchmarks/ledger_overhead.py [--repeats 5] [--epochs 5] [--minutes 30] [--threads 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch

from devicepipe.bench.results import source_commit
from devicepipe.core.device import device_report
from devicepipe.core.interop import count_transfers
from devicepipe.io import write_parquet
from devicepipe.pipelines import LearnSettings, run_ecg
from devicepipe.simulate import simulate_ecg

MODES = ("off", "on", "whole")


def _one(mode: str, source: Path, out: Path, settings: LearnSettings) -> tuple[float, dict[str, float]]:
    started = time.perf_counter()
    if mode == "whole":
        with count_transfers():
            result = run_ecg(source, out, settings=settings, device="cpu", count_transfers=False)
    else:
        result = run_ecg(source, out, settings=settings, device="cpu", count_transfers=mode == "on")
    return time.perf_counter() - started, result.summary["seconds"]


def markdown(result: dict) -> str:
    """The summary table: medians, ratios of medians, and the paired (same-round) ratios with their range."""
    wall = result["wall_s"]
    medians = result["median_wall_s"]
    lines = [
        "# Transfer ledger: overhead on a whole pipeline",
        "",
        f"`run_ecg` on a simulated {result['recording']['minutes']:g}-minute ECG at 250 Hz"
        f" ({result['recording']['beats']:,} beats), {result['epochs']} epochs, CPU, {result['threads']} thread(s),"
        f" {result['repeats']} interleaved rounds after a warm-up; {result['cpu']}; torch {result['torch']};"
        f" {result['date'][:10]}. Produced by `python benchmarks/ledger_overhead.py`; data in `ledger_overhead.json`.",
        "",
        "| ledger | median wall (s) | median / off's median | paired ratio to off: median (range) |"
        " median train stage (s) |",
        "|---|---|---|---|---|",
    ]
    names = {"off": "off", "on": "on, every stage but training (default)", "whole": "around the whole run"}
    for m in MODES:
        paired = [a / b for a, b in zip(wall[m], wall["off"], strict=True)]
        lines.append(
            f"| {names[m]} | {medians[m]:.3f} | {medians[m] / medians['off']:.3f} |"
            f" {statistics.median(paired):.3f} ({min(paired):.3f}-{max(paired):.3f}) |"
            f" {result['median_train_s'][m]:.3f} |"
        )
    return "\n".join(lines) + "\n"


def _write_report(result: dict, out: Path) -> None:
    text = markdown(result)
    (out / "ledger_overhead.md").write_text(text, encoding="utf-8")
    print(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the simulated ECG")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--report", type=Path, default=None, help="only rewrite the Markdown from this JSON")
    args = parser.parse_args(argv)
    if args.report is not None:
        _write_report(json.loads(args.report.read_text(encoding="utf-8")), args.report.parent)
        return 0
    torch.set_num_threads(args.threads)
    settings = LearnSettings(epochs=args.epochs)
    wall: dict[str, list[float]] = {m: [] for m in MODES}
    train: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "ecg.parquet"
        sim = simulate_ecg(args.minutes * 60, 250, seed=0, ectopic_rate=0.01)
        write_parquet({"ecg": sim.signal}, source, sampling_rate=250)
        _one("off", source, Path(tmp) / "warm-up", settings)  # imports, allocator, caches
        for r in range(args.repeats + 1):
            order = MODES if r % 2 == 0 else MODES[::-1]  # alternate the order: no mode always runs first
            for mode in order:
                seconds, stages = _one(mode, source, Path(tmp) / f"{mode}-{r}", settings)
                if r == 0:
                    continue  # a second warm-up round, one of each
                wall[mode].append(seconds)
                train[mode].append(stages["train"])
                print(f"repeat {r} {mode:>5}: {seconds:.3f} s (train {stages['train']:.3f} s)", flush=True)
    medians = {m: statistics.median(v) for m, v in wall.items()}
    result = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": source_commit(Path(__file__).resolve().parents[1]),  # "-dirty" where tracked files differ
        "platform": platform.platform(),
        "cpu": device_report()["cpu"]["model"],
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "recording": {"minutes": args.minutes, "sampling_rate_hz": 250, "beats": int(sim.r_peaks.numel())},
        "epochs": args.epochs,
        "repeats": args.repeats,
        "wall_s": wall,
        "train_s": train,
        "median_wall_s": medians,
        "median_train_s": {m: statistics.median(v) for m, v in train.items()},
        "ratio_to_off": {m: medians[m] / medians["off"] for m in MODES},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ledger_overhead.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    _write_report(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
