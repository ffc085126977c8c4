"""How many beats the default scorer flags where nothing is unusual, by noise level and lining up.

    python benchmarks/clean_flags.py            # 27 clean recordings, 7 with ectopy (about 8 min on 2 cores)

A recording with nothing unusual should have (almost) nothing flagged. This simulates clean
ECGs (sinus rhythm with heart-rate variability, baseline wander and white noise, no ectopic
beat) at 250 and 500 Hz, 30 and 60 minutes, three noise levels and three seeds, cuts their beats
as ``ecg`` does (levelled, resampled to 256 samples, standardised) and counts the beats the
default detector flags (scorer ``local``, contamination 1 %, its fence, and its least effect
``min_effect``: 15 % of a typical beat), with the beats lined up by whole columns (``ecg``'s) and
not at all, and, lined up, with the threshold alone (``min_effect=0``); with each flag's effect
(how large its difference is, as a share of a typical beat). The
detector is fitted for one epoch: the ``local`` scores do not use the model, so its flags are
those of a fully trained one (``tests/unit/test_detector.py`` checks that they stay the same
when the model learns from other rows). The demo's recording (1 % ventricular beats), quiet
recordings (0.01 mV) with 1 to 20 % ventricular beats, and MIT-BIH record 100 show what the
lining up and the least effect do to the flags of true ectopic beats.

Results: ``benchmarks/results/clean_flags.{json,md}``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from results_io import heading, machine, parser, table, write_results

import devicepipe as dp
from devicepipe.ecg import label_beats
from devicepipe.pipelines.learning import model_rows
from devicepipe.scorers.neighbours import MIN_EFFECT
from devicepipe.signal.scale import StandardScaler

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("DEVICEPIPE_DATA", ROOT.parent / "shared" / "data"))
WIDTH = 256
#: (sampling rate in Hz, minutes) of the clean recordings.
SHAPES = [(250.0, 30), (500.0, 30), (250.0, 60)]
NOISE_MV = [0.01, 0.02, 0.05]
SEEDS = [0, 1, 2]
#: (share of ventricular beats, Hz) of the quiet recordings with ectopy (0.01 mV of noise, 30 minutes).
QUIET_ECTOPY = [(0.01, 250.0), (0.05, 250.0), (0.05, 500.0), (0.2, 250.0), (0.2, 500.0)]
#: How the beats are lined up (model_rows' align) and the least effect of a flag, by name.
RULES = {
    "whole columns": (True, MIN_EFFECT),
    "none": (False, MIN_EFFECT),
    "whole columns, threshold alone": (True, 0.0),
}


def rows_of(signal: torch.Tensor, fs: float, align: bool) -> tuple[torch.Tensor, Any]:
    """The beats ``(n, WIDTH)`` of ``signal`` as ``ecg`` cuts and scales them, lined up as asked, and the beats."""
    beats = dp.ecg_segment(signal, dp.ecg_peaks(signal, fs), fs, mode="centered")
    matrix = model_rows(beats, signal, WIDTH, align=align)
    scaler = StandardScaler().fit(matrix.reshape(-1))
    return scaler.transform(matrix.reshape(-1)).reshape(matrix.shape), beats


def flags(rows: torch.Tensor, min_effect: float) -> tuple[np.ndarray, np.ndarray]:
    """The default detector's flags of ``rows`` with ``min_effect``, ``(n,)`` booleans, and each row's effect."""
    det = dp.BeatAnomalyDetector(
        epochs=1, device="cpu", seed=0, threads=1, width=WIDTH, scaling="none", min_effect=min_effect
    ).fit(rows)
    return det.labels_.astype(bool), det.details_.effects.numpy()


def clean_rows() -> list[dict[str, Any]]:
    """Flags on every clean recording, by alignment."""
    out = []
    for fs, minutes in SHAPES:
        for noise in NOISE_MV:
            for seed in SEEDS:
                sim = dp.simulate_ecg(60.0 * minutes, fs, noise_mV=noise, seed=seed)
                for name, (align, least) in RULES.items():
                    flagged, effects = flags(rows_of(sim.signal, fs, align)[0], least)
                    out.append(
                        {"hz": fs, "minutes": minutes, "noise_mV": noise, "seed": seed, "alignment": name}
                        | {"beats": int(flagged.size), "flagged": int(flagged.sum())}
                        | {"flagged_effects": sorted(effects[flagged].round(4).tolist())}
                    )
    return out


def ectopic_rows() -> list[dict[str, Any]]:
    """Flags by reference label on the demo's recording, quiet recordings with 1 to 20 % ventricular
    beats, and MIT-BIH 100, by rule."""
    sim = dp.simulate_ecg(1800.0, 250.0, heart_rate_bpm=72.0, noise_mV=0.03, wander_mV=0.2, ectopic_rate=0.01, seed=0)
    recordings = {"demo (1 % V)": (sim.signal, 250.0, sim.r_peaks, sim.symbols)}
    for rate, fs in QUIET_ECTOPY:
        sim = dp.simulate_ecg(1800.0, fs, noise_mV=0.01, ectopic_rate=rate, seed=7)
        recordings[f"{100 * rate:g} % V, {fs:g} Hz, 0.01 mV"] = (sim.signal, fs, sim.r_peaks, sim.symbols)
    if (DATA / "mitdb" / "100.dat").exists():
        rec = dp.read_series(DATA / "mitdb" / "100", "MLII", device="cpu")
        ref = dp.read_reference(DATA / "mitdb" / "100.atr")
        recordings["MIT-BIH 100"] = (rec.samples, rec.sampling_rate, ref.samples_at(rec.sampling_rate), ref.symbols)
    out = []
    for recording, (signal, fs, r_peaks, symbols) in recordings.items():
        for name, (align, least) in RULES.items():
            rows, beats = rows_of(signal, fs, align)
            labels = np.asarray(label_beats(r_peaks, np.asarray(symbols), beats.peaks, fs))
            flagged, effects = flags(rows, least)
            counts = {str(s): (int(flagged[labels == s].sum()), int((labels == s).sum())) for s in np.unique(labels)}
            by_label = {s: f"{f} of {n}" for s, (f, n) in counts.items() if s}
            out.append(
                {"recording": recording, "alignment": name, "flagged_by_label": by_label}
                | {"flagged_effects": sorted(effects[flagged].round(4).tolist())}
            )
    return out


def summary(clean: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The clean flags pooled over the seeds, by recording shape, noise and alignment: flagged of
    beats, and the fewest and most on one recording."""
    pooled = []
    for fs, minutes in SHAPES:
        for noise in NOISE_MV:
            for name in RULES:
                key = (fs, minutes, noise, name)
                part = [r for r in clean if (r["hz"], r["minutes"], r["noise_mV"], r["alignment"]) == key]
                flagged, beats = sum(r["flagged"] for r in part), sum(r["beats"] for r in part)
                each = [r["flagged"] for r in part]
                largest = max((e for r in part for e in r["flagged_effects"]), default=None)
                pooled.append(
                    {"hz": fs, "minutes": minutes, "noise_mV": noise, "alignment": name}
                    | {"flagged": flagged, "beats": beats, "percent": round(100.0 * flagged / beats, 2)}
                    | {"fewest": min(each), "most": max(each), "largest_flagged_effect": largest}
                )
    return pooled


def main() -> int:
    args = parser(__doc__).parse_args()
    torch.set_num_threads(1)
    clean = clean_rows()
    pooled = summary(clean)
    ectopic = ectopic_rows()
    result = {**machine(), "clean": clean, "pooled": pooled, "ectopic": ectopic}
    lines = [
        heading("Flags where nothing is unusual, by lining up and least effect", result, "1 thread", result["cpu"]),
        "",
        f"Clean simulated ECGs (no ectopic beat), seeds {', '.join(map(str, SEEDS))}: beats flagged by the "
        "default detector, pooled over the three seeds, and the fewest and most on one recording. At most 1 % "
        "is flagged (the contamination share); the fence flags fewer where the scores' upper tail is short; "
        f"a flag needs a difference of at least {100 * MIN_EFFECT:g} % of a typical beat (min_effect), except "
        "with the threshold alone. Effect: a flagged beat's difference as a share of a typical beat.",
        "",
        *table(
            ["Hz", "minutes", "noise (mV)", "lined up by", "flagged", "share", "fewest / most on one"]
            + ["largest effect flagged"],
            [
                [f"{r['hz']:g}", r["minutes"], f"{r['noise_mV']:g}", r["alignment"]]
                + [f"{r['flagged']} of {r['beats']:,}", f"{r['percent']:.2f} %", f"{r['fewest']} / {r['most']}"]
                + ["-" if r["largest_flagged_effect"] is None else f"{r['largest_flagged_effect']:.3f}"]
                for r in pooled
            ],
        ),
        "",
        "Recordings with ectopic beats: flagged of each reference label, and the smallest effect of a flag.",
        "",
        *table(
            ["recording", "lined up by", "flagged by label", "smallest effect flagged"],
            [
                [r["recording"], r["alignment"], ", ".join(f"{k} {v}" for k, v in r["flagged_by_label"].items())]
                + [f"{min(r['flagged_effects']):.3f}" if r["flagged_effects"] else "-"]
                for r in ectopic
            ],
        ),
    ]
    write_results(args.out, "clean_flags", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
