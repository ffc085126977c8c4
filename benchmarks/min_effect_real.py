"""What the least effect of a flag (``min_effect``) does on real recordings and datasets.

    python benchmarks/min_effect_real.py        # about 3 minutes on 2 cores

``min_effect`` was set on simulated recordings (``benchmarks/clean_flags.py``). Here the default
detector (scorer ``local``, fitted for one epoch: its scores do not use the model) flags the
same rows with ``min_effect=0`` (the threshold alone) and with the default, on:

- the nine CPSC 2021 records, first lead, beats cut, lined up and standardised as ``ecg`` does,
  fitted on each record's own beats; flags counted by reference label;
- ECG5000: trained on the normal rows of its TRAIN file, scoring its TEST file;
- the UCR one-class tasks of ``benchmarks/one_class.py``: each class in turn normal, a seeded
  50/50 split of it to train on, scoring the held-back half and every other class (seed 0).

Per case: the rows flagged each way, normal and anomalous, and the smallest effect among the
anomalous rows the threshold alone flags. Results: ``benchmarks/results/min_effect_real.{json,md}``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from clean_flags import rows_of
from results_io import heading, machine, parser, table, write_results

import devicepipe as dp
from devicepipe.ecg import label_beats
from devicepipe.scorers.neighbours import MIN_EFFECT

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("DEVICEPIPE_DATA", ROOT.parent / "shared" / "data"))
UCR = [
    "CBF_TEST.tsv",
    "GunPoint_TEST.tsv",
    "ItalyPowerDemand_TEST.txt",
    "MoteStrain_TEST.tsv",
    "SonyAIBORobotSurface1_TEST.tsv",
]


def both(train: Any, score: Any = None, **kw: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """(flags, effects) of the rows of ``score`` (else of ``train``) by the threshold alone, then by the default."""
    out = []
    for least in (0.0, MIN_EFFECT):
        det = dp.BeatAnomalyDetector(epochs=1, device="cpu", seed=0, threads=1, min_effect=least, **kw).fit(train)
        s = det.details_ if score is None else det.score_details(score)
        out.append((s.flags.cpu().numpy(), s.effects.cpu().numpy()))
    return out


def row(case: str, anomalous: np.ndarray, results: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    (alone, effects), (default, _) = results
    kept = effects[alone & anomalous]
    return {
        "case": case,
        "rows": int(anomalous.size),
        "anomalous": int(anomalous.sum()),
        "alone": {"anomalous": int(alone[anomalous].sum()), "normal": int(alone[~anomalous].sum())},
        "default": {"anomalous": int(default[anomalous].sum()), "normal": int(default[~anomalous].sum())},
        "smallest_anomalous_effect_flagged": float(kept.min()) if kept.size else None,
    }


def cpsc2021() -> list[dict[str, Any]]:
    out = []
    for hea in sorted((DATA / "cpsc2021").glob("*.hea")):
        rec = dp.read_series(hea.with_suffix(""), device="cpu")
        signal = rec.samples[0] if rec.samples.ndim == 2 else rec.samples
        ref = dp.read_reference(hea.with_suffix(".atr"))
        rows, beats = rows_of(signal, rec.sampling_rate, True)
        labels = np.asarray(label_beats(ref.samples_at(rec.sampling_rate), ref.symbols, beats.peaks, rec.sampling_rate))
        results = both(rows, width=rows.shape[1], scaling="none")
        out.append(row(f"CPSC 2021 {hea.stem}", (labels != "N") & (labels != ""), results))
    return out


def datasets() -> list[dict[str, Any]]:
    train = np.loadtxt(DATA / "ecg5000" / "ECG5000_TRAIN.txt")
    test = np.load(DATA / "ecg5000" / "ECG5000_TEST.npy")
    normal = train[train[:, 0] == 1, 1:].astype(np.float32)
    out = [row("ECG5000", test[:, 0] != 1, both(normal, test[:, 1:].astype(np.float32)))]
    for name in UCR:
        data = np.loadtxt(DATA / "ucr" / name, delimiter="\t" if name.endswith(".tsv") else None)
        for c in np.unique(data[:, 0]):
            own = data[data[:, 0] == c]
            order = np.random.default_rng(0).permutation(len(own))
            half = len(own) // 2
            test = np.concatenate([own[order[half:]], data[data[:, 0] != c]])
            results = both(own[order[:half], 1:].astype(np.float32), test[:, 1:].astype(np.float32))
            out.append(row(f"{name.split('_')[0]} ({int(c)})", test[:, 0] != c, results))
    return out


def main() -> int:
    args = parser(__doc__).parse_args()
    torch.set_num_threads(1)
    rows = cpsc2021() + datasets()
    result = {**machine(), "min_effect": MIN_EFFECT, "rows": rows}
    lines = [
        heading("The least effect of a flag on real recordings and datasets", result, "1 thread", result["cpu"]),
        "",
        f"Rows flagged by the threshold alone (min_effect 0) and by the default (min_effect {MIN_EFFECT:g}): "
        "anomalous (CPSC 2021: beats labelled other than N, unlabelled beats counted with the normal ones; the "
        "datasets: rows of the other classes) and normal.",
        "",
        *table(
            ["case", "rows", "anomalous", "threshold alone", "default", "smallest anomalous effect flagged"],
            [
                [r["case"], r["rows"], r["anomalous"]]
                + [f"{r[k]['anomalous']} anomalous, {r[k]['normal']} normal" for k in ("alone", "default")]
                + [
                    "-"
                    if r["smallest_anomalous_effect_flagged"] is None
                    else f"{r['smallest_anomalous_effect_flagged']:.3f}"
                ]
                for r in rows
            ],
        ),
    ]
    write_results(args.out, "min_effect_real", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
