"""Beats from all leads: each lead alone against the leads fused, and with one lead lost, on the
two-lead shared records (MIT-BIH 100 and the nine CPSC 2021 records).

A lost lead is simulated three ways: replaced by a flat line (an electrode off), by a saturated
constant, and by white noise of the other lead's standard deviation. Scoring as everywhere here:
150 ms, the first and last 0.5 s not scored; pooled over the records.

    python benchmarks/ecg_leads.py [--data DIR] [--out DIR]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from evaluation import annotated_records  # beside this script
from results_io import machine, parser, table, write_results

from devicepipe.ecg import BeatScore, ecg_peaks, evaluate_beats
from devicepipe.io import read_series
from devicepipe.io.reference import read_beat_annotations

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def cases(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The inputs compared on one two-lead recording ``x`` of shape ``(2, time)``."""
    g = torch.Generator().manual_seed(0)
    out = {"lead 0 alone": x[0], "lead 1 alone": x[1], "fused": x}
    for lost in (0, 1):
        kept = x[1 - lost]
        for how, signal in (
            ("flat", torch.zeros_like(kept)),
            ("saturated", torch.full_like(kept, float(kept.abs().max()) * 2)),
            ("noise", torch.randn(kept.shape, generator=g) * kept.std()),
        ):
            pair = [kept, signal] if lost == 1 else [signal, kept]
            out[f"fused, lead {lost} {how}"] = torch.stack(pair)
    return out


def run(data: Path) -> dict[str, Any]:
    per_record: dict[str, dict[str, dict[str, float]]] = {}
    pooled: dict[str, BeatScore] = {}
    for _group, name, path in annotated_records(data):
        rec = read_series(path)
        ref = read_beat_annotations(path)
        per_record[name] = {}
        for label, x in cases(rec.samples).items():
            peaks = ecg_peaks(x, rec.sampling_rate, leads="fuse") if x.ndim == 2 else ecg_peaks(x, rec.sampling_rate)
            score = evaluate_beats(ref.samples, peaks, rec.sampling_rate, n_samples=rec.n_samples)
            per_record[name][label] = score.to_dict()
            pooled[label] = pooled[label] + score if label in pooled else score
    return {**machine(), "records": list(per_record), "per_record": per_record,
            "pooled": {k: v.to_dict() for k, v in pooled.items()}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = p.parse_args(argv)
    result = run(args.data)
    pooled = result["pooled"]
    rows = [
        [label, f"{s['f1']:.4f}", f"{s['sensitivity']:.4f}", f"{s['ppv']:.4f}", f"{s['tp']} / {s['fp']} / {s['fn']}"]
        for label, s in pooled.items()
    ]
    names = list(result["per_record"])
    labels = list(pooled)[:3]
    per = [[n, *(f"{result['per_record'][n][k]['f1']:.4f}" for k in labels)] for n in names]
    lines = [
        "# Beats from all leads: MIT-BIH 100 and the nine CPSC 2021 records",
        "",
        f"{result['date']}, commit {result['commit']}, {result['cpu']}, {result['usable_cores']} cores, "
        f"torch {result['torch']}. "
        "Produced by `python benchmarks/ecg_leads.py`; 150 ms, edges of 0.5 s not scored.",
        "",
        *table(["input", "pooled F1", "sensitivity", "positive predictivity", "TP / FP / FN"], rows),
        "",
        *table(["record", *(f"F1, {k}" for k in labels)], per),
    ]
    write_results(args.out, "ecg_leads", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
