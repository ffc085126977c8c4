"""Scorers on one recording whose anomalies are among the training rows (what ``ecg`` does).

    python benchmarks/scorers_on_a_recording.py

The demo's recording (``devicepipe demo``: 30 minutes at 250 Hz, seed 0, about 1 % ventricular
ectopic beats), and the same with 3 %: its beats are cut as ``ecg`` cuts them, the detector is
fitted on all of them (anomalies included) with each scorer, and the flags are counted per
simulated label. ``local`` is the default scorer, and ``k`` "auto" the default,
``floor(contamination x beats) + 1``: the 3 % recording shows what it does when the ectopic
beats outnumber the share it allows for, at the default contamination (0.01) and at one that
says how many there are (0.05).
Results: ``benchmarks/results/scorers_on_a_recording.{json,md}``.
"""

from __future__ import annotations

import torch
from results_io import heading, machine, parser, table, write_results

import devicepipe as dp
from devicepipe.ecg import label_beats


def main() -> int:
    args = parser(__doc__).parse_args()
    torch.set_num_threads(1)
    rows = []
    cases = [
        (0.01, 0.01, "local", "auto"),
        (0.01, 0.01, "multiscale", "auto"),
        (0.01, 0.01, "reconstruction", "auto"),
        (0.01, 0.01, "knn", 5),
        (0.01, 0.01, "knn", "auto"),
        (0.01, 0.01, "combined", "auto"),
        (0.03, 0.01, "local", "auto"),
        (0.03, 0.01, "multiscale", "auto"),
        (0.03, 0.01, "reconstruction", "auto"),
        (0.03, 0.01, "knn", "auto"),
        (0.03, 0.05, "local", "auto"),
        (0.03, 0.05, "multiscale", "auto"),
        (0.03, 0.05, "knn", "auto"),
        (0.03, 0.05, "reconstruction", "auto"),
    ]
    recordings = {}
    for rate, contamination, scorer, k in cases:
        if rate not in recordings:
            sim = dp.simulate_ecg(
                1800.0, 250.0, heart_rate_bpm=72.0, noise_mV=0.03, wander_mV=0.2, ectopic_rate=rate, seed=0
            )
            peaks = dp.ecg_peaks(sim.signal, 250.0)
            beats = dp.ecg_segment(sim.signal, peaks, 250.0, mode="centered", width=256)
            recordings[rate] = (beats, label_beats(sim.r_peaks, sim.symbols, beats.peaks, 250.0))
        beats, labels = recordings[rate]
        det = dp.BeatAnomalyDetector(
            scorer=scorer, neighbours=k, contamination=contamination, device="cpu", seed=0, threads=1
        ).fit(beats)
        flags = det.labels_.astype(bool)
        rows.append(
            {
                "ectopic_rate": rate,
                "contamination": contamination,
                "scorer": scorer,
                "neighbours": det.neighbours_,
                "V_flagged": int(flags[labels == "V"].sum()),
                "V": int((labels == "V").sum()),
                "N_flagged": int(flags[labels == "N"].sum()),
                "N": int((labels == "N").sum()),
                "auc_V_vs_N": dp.evaluate_anomalies(
                    labels[labels != ""] == "V", det.decision_scores_[labels != ""]
                ).roc_auc,
            }
        )
    result = {**machine(), "threads": 1, "rows": rows}
    lines = [
        heading("Scorers on the demo recording: anomalies among the training rows", result, "1 thread", result["cpu"]),
        "",
        *table(
            ["ectopic beats", "contamination", "scorer", "k", "V flagged", "N flagged", "AUC V vs N"],
            [
                [f"{r['ectopic_rate']:.0%}", f"{r['contamination']:g}", r["scorer"], r["neighbours"] or "-"]
                + [f"{r['V_flagged']} of {r['V']}", f"{r['N_flagged']} of {r['N']}", f"{r['auc_V_vs_N']:.4f}"]
                for r in rows
            ],
        ),
    ]
    write_results(args.out, "scorers_on_a_recording", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
