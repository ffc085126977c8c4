"""Beat classes (AAMI EC57: N, S, V, F, Q) and Holter events against truth: simulated recordings at
every burden of ectopy, MIT-BIH 100 and the CPSC 2021 records.

Beats are found by the default detector on the first lead and matched to the truth within 150 ms
(the first and last 0.5 s not scored), as EC57 asks; per class: sensitivity (Se), positive
predictivity (+P, over the matched beats given the class) and false-positive rate (FPR: the share
of the truth's other beats given the class). Events: every simulated couplet, run, pause and
bigeminy episode, found when one of its kind starts within one beat of it. Cost: the classes
stage's seconds in a ``devicepipe ecg`` run on MIT-BIH 100 (``--epochs 5``), against the run's.

    python benchmarks/beat_classes.py [--data DIR] [--out DIR]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from evaluation import annotated_records  # beside this script
from results_io import machine, parser, run_measured, table, write_results

from devicepipe.ecg import aami_class, ecg_peaks
from devicepipe.ecg.classes import ecg_classes
from devicepipe.ecg.several_leads import ecg_classes_leads
from devicepipe.heart.holter import holter_summary
from devicepipe.io import read_series
from devicepipe.io.reference import read_beat_annotations
from devicepipe.simulate import Rhythm, simulate_ecg

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CLASSES = ("N", "S", "V", "F", "Q")
#: Simulated 30-minute recordings: name -> rhythm (the burden the target names).
V_BURDENS = {
    "1 %": Rhythm(ectopic_rate=0.01),
    "10 %": Rhythm(ectopic_rate=0.12),
    "25 %": Rhythm(trigeminy=0.6, ectopic_rate=0.06),
    "50 %": Rhythm(bigeminy=1.0),
}
S_BURDENS = {"1 %": 0.01, "5 %": 0.05, "10 %": 0.1, "20 %": 0.25}
#: For context only (other data, other beats): de Chazal, O'Dwyer and Reilly, IEEE TBME 51(7), 2004,
#: inter-patient results on MIT-BIH's DS2, percent.
PUBLISHED = {
    "source": "de Chazal et al. 2004, MIT-BIH DS2",
    "V_sensitivity_pct": 77.7,
    "V_ppv_pct": 81.9,
    "S_sensitivity_pct": 75.9,
    "S_ppv_pct": 38.5,
}


def _match(truth: np.ndarray, found: np.ndarray, fs: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the truth's beats scored (inside the edges) and of the found beat each matches (-1: none)."""
    scored = np.flatnonzero((truth >= 0.5 * fs) & (truth < n - 0.5 * fs))
    at = np.searchsorted(found, truth[scored])
    best = np.full(scored.size, -1)
    for j, (t, k) in enumerate(zip(truth[scored], at, strict=True)):
        near = [i for i in (k - 1, k) if 0 <= i < found.size and abs(int(found[i]) - int(t)) <= 0.15 * fs]
        if near:
            best[j] = min(near, key=lambda i: abs(int(found[i]) - int(t)))
    return scored, best


def class_counts(truth_classes: np.ndarray, labels: np.ndarray, best: np.ndarray) -> dict[str, dict[str, int]]:
    """Per class: the truth's beats of it, those matched and given it, the matched beats given it,
    and the truth's other beats given it."""
    got = np.where(best >= 0, labels[np.clip(best, 0, None)], "-")
    out = {}
    for k in CLASSES:
        out[k] = {
            "truth": int(np.sum(truth_classes == k)),
            "tp": int(np.sum((truth_classes == k) & (got == k))),
            "given": int(np.sum(got == k)),
            "others": int(np.sum(truth_classes != k)),
            "others_given": int(np.sum((truth_classes != k) & (got == k))),
        }
    return out


def rates(c: dict[str, int]) -> dict[str, float | None]:
    return {
        "se": c["tp"] / c["truth"] if c["truth"] else None,
        "ppv": c["tp"] / c["given"] if c["given"] else None,
        "fpr": c["others_given"] / c["others"] if c["others"] else None,
    }


def add(a: dict[str, dict[str, int]] | None, b: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return b if a is None else {k: {f: a[k][f] + b[k][f] for f in b[k]} for k in b}


def simulated(name: str, rhythm: Rhythm, fs: float, noise: float, seed: int) -> dict[str, Any]:
    sim = simulate_ecg(1800, fs, noise_mV=noise, rhythm=rhythm, seed=seed)
    peaks = ecg_peaks(sim.signal, fs)
    c = ecg_classes(sim.signal, peaks, fs)
    truth, found = sim.r_peaks.numpy(), peaks.numpy()
    scored, best = _match(truth, found, fs, sim.signal.numel())
    counts = class_counts(sim.classes[scored], c.labels, best)
    h = holter_summary(found / fs, c.labels, c.irregular, sim.duration_s, c.not_beats)
    events = {}
    index = np.full(truth.size, -1)
    index[scored] = best
    for kind, a, _ in sim.events:
        if kind in ("couplet", "run", "pause", "bigeminy"):
            start = index[a - 1 if kind == "pause" else a]
            hit = start >= 0 and any(abs(e.first_beat - start) <= 1 for e in h.of(kind))
            events.setdefault(kind, [0, 0])
            events[kind][0] += 1
            events[kind][1] += int(hit)
    return {"name": name, "fs": fs, "noise_mV": noise, "counts": counts, "events": events}


def real(data: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each annotated record's class counts, classed on every lead (as the commands class them),
    and on the first lead alone (as they did before): beats found on the first lead either way."""
    out, first = {}, {}
    for _group, name, path in annotated_records(data):
        rec = read_series(path)
        x = rec.samples if rec.samples.ndim == 1 else rec.samples[0]
        ref = read_beat_annotations(path)
        classes = np.array([aami_class(s) or "" for s in ref.symbols])
        keep = classes != ""
        peaks = ecg_peaks(x, rec.sampling_rate)
        scored, best = _match(ref.samples[keep], peaks.numpy(), rec.sampling_rate, rec.n_samples)
        c = ecg_classes_leads(rec.samples, peaks, rec.sampling_rate)
        out[name] = class_counts(classes[keep][scored], c.labels, best)
        first[name] = class_counts(classes[keep][scored], ecg_classes(x, peaks, rec.sampling_rate).labels, best)
    return out, first


def cost(data: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        args = [sys.executable, "-m", "devicepipe", "ecg", str(data / "mitdb" / "100"), "--out", tmp, "--epochs", "5"]
        started = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        wall = time.perf_counter() - started
        seconds = json.loads((Path(tmp) / "summary.json").read_text())["seconds"]
    return {"wall_s": wall, "classes_s": seconds["classes"], "stages_s": sum(seconds.values()), "stages": seconds}


def long_run() -> dict[str, Any]:
    """A simulated day (250 Hz, with every kind of event) through ``devicepipe beats``, read in
    chunks of an hour and in one piece: wall seconds, peak resident memory, the classes stage's
    seconds, and the V and S beats found against the truth's."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        day = Path(tmp) / "day.npy"
        rhythm = Rhythm(ectopic_rate=0.03, atrial_rate=0.02, couplets=20, runs=5, pauses=5, bigeminy=0.02, afib=0.05)
        sim = simulate_ecg(86_400, 250.0, rhythm=rhythm, seed=4)
        np.save(day, sim.signal.numpy())
        out["truth"] = {k: int((sim.classes == k).sum()) for k in ("N", "S", "V")}
        del sim
        for how, extra in (("chunked 1 h", ["--chunk", "1h"]), ("whole", [])):
            run_dir = Path(tmp) / how.replace(" ", "_")
            args = ["beats", str(day), "--sampling-rate", "250", "--no-figures", "--device", "cpu",
                    "--out", str(run_dir), *extra]  # fmt: skip
            wall, peak, proc = run_measured(args)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr)
            summary = json.loads((run_dir / "summary.json").read_text())
            out[how] = {"wall_s": wall, "peak_rss_bytes": peak, "peak_rss_mib": peak / 2**20,
                        "classes_s": summary["seconds"]["classes"], "counts": summary["holter"]["counts"]}  # fmt: skip
    return out


def run(data: Path) -> dict[str, Any]:
    torch.set_num_threads(1)
    v_runs = [simulated(f"V {name}", rhythm, fs, noise, seed=100 * i + int(fs))
              for i, (name, rhythm) in enumerate(V_BURDENS.items()) for fs in (250.0, 360.0, 500.0)
              for noise in (0.02, 0.08)]  # fmt: skip
    s_runs = [simulated(f"S {name}", Rhythm(atrial_rate=share), 360.0, noise, seed=7 + i)
              for i, (name, share) in enumerate(S_BURDENS.items()) for noise in (0.02, 0.08)]  # fmt: skip
    patterns = Rhythm(couplets=4, runs=3, pauses=3, bigeminy=0.1, ectopic_rate=0.01)
    settings = [(250.0, 0.02), (360.0, 0.08), (500.0, 0.02), (250.0, 0.08)]
    event_runs = [simulated("events", patterns, fs, noise, seed=40 + i) for i, (fs, noise) in enumerate(settings)]
    on_leads, on_first = real(data)
    return {**machine(), "torch_threads": 1, "v": v_runs, "s": s_runs, "events": event_runs, "real": on_leads,
            "real_first_lead": on_first, "cost": cost(data), "day": long_run(), "published": PUBLISHED}  # fmt: skip


def _fmt(x: float | None, pct: bool = True) -> str:
    return "-" if x is None else f"{100 * x:.1f} %" if pct else f"{x:.3f}"


def markdown(result: dict[str, Any]) -> str:
    v_rows = []
    for r in result["v"]:
        v, n = rates(r["counts"]["V"]), r["counts"]["N"]
        n_as_v = r["counts"]["V"]["others_given"] / max(r["counts"]["V"]["others"], 1)
        v_rows.append([r["name"], f"{r['fs']:g}", f"{r['noise_mV']:g}", r["counts"]["V"]["truth"], _fmt(v["se"]),
                       _fmt(v["ppv"]), _fmt(n_as_v), n["truth"]])  # fmt: skip
    s_rows = []
    for r in result["s"]:
        s = rates(r["counts"]["S"])
        s_rows.append([r["name"], f"{r['noise_mV']:g}", r["counts"]["S"]["truth"], _fmt(s["se"]), _fmt(s["ppv"]),
                       _fmt(s["fpr"])])  # fmt: skip
    events: dict[str, list[int]] = {}
    for r in result["events"]:
        for kind, (n, hit) in r["events"].items():
            events.setdefault(kind, [0, 0])
            events[kind][0] += n
            events[kind][1] += hit
    e_rows = [[kind, n, hit] for kind, (n, hit) in events.items()]
    real_rows = []
    pooled = None
    for name, counts in result["real"].items():
        if name != "100":
            pooled = add(pooled, counts)
        for k in ("S", "V"):
            if counts[k]["truth"] or counts[k]["given"]:
                r = rates(counts[k])
                real_rows.append([name, k, counts[k]["truth"], counts[k]["tp"], counts[k]["given"], _fmt(r["se"]),
                                  _fmt(r["ppv"]), _fmt(r["fpr"])])  # fmt: skip
    first = None
    for name, counts in result.get("real_first_lead", {}).items():
        first = first if name == "100" else add(first, counts)
    for label, counts in (("CPSC 2021, pooled", pooled), ("CPSC 2021, pooled, first lead alone", first)):
        for k in ("N", "S", "V", "Q") if counts else ():
            r = rates(counts[k])
            real_rows.append([label, k, counts[k]["truth"], counts[k]["tp"], counts[k]["given"],
                              _fmt(r["se"]), _fmt(r["ppv"]), _fmt(r["fpr"])])  # fmt: skip
    c = result["cost"]
    lines = [
        "# Beat classes and Holter events against truth",
        "",
        f"{result['date']}, {result['cpu']}, {result['usable_cores']} cores, torch {result['torch']} at 1 thread "
        "(run with `OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE`), "
        f"commit {result.get('commit', '?')}. Produced by `python benchmarks/beat_classes.py`. Beats found by the "
        "default detector on the first lead, matched within 150 ms, the first and last 0.5 s not scored.",
        "",
        "Ventricular beats on simulated 30-minute recordings (targets: Se and +P at least 95 %, at most 1 % of "
        "N called V):",
        "",
        *table(["burden", "Hz", "noise (mV)", "V beats", "Se", "+P", "N called V", "N beats"], v_rows),
        "",
        "Atrial premature beats (S) on simulated 30-minute recordings at 360 Hz (targets: Se at least 90 %, +P at "
        "least 80 %):",
        "",
        *table(["atrial rate", "noise (mV)", "S beats", "Se", "+P", "FPR"], s_rows),
        "",
        "Events on four simulated 30-minute recordings (4 couplets, 3 runs, 3 pauses and bigeminy 10 % of the "
        "time each), found when one of the kind starts within one beat:",
        "",
        *table(["event", "simulated", "found"], e_rows),
        "",
        "Real records (reference annotations; classed on every lead, V where most leads that read the beat call "
        "it V, as the commands class them; CPSC 2021 pooled over its nine records, and pooled again as classed "
        "on the first lead alone):",
        "",
        *table(["record", "class", "reference beats", "TP", "given the class", "Se", "+P", "FPR"], real_rows),
        "",
        f"Cost: in `devicepipe ecg mitdb/100 --epochs 5` the classes stage took {c['classes_s']:.3f} s of "
        f"{c['stages_s']:.2f} s of stages ({100 * c['classes_s'] / c['stages_s']:.1f} %), {c['wall_s']:.1f} s wall.",
        "",
        "A simulated day (250 Hz, 3 % V, 2 % S, couplets, runs, pauses, bigeminy, fibrillation) through "
        "`devicepipe beats --no-figures` (as the whole benchmark, at 1 thread: `OMP_NUM_THREADS=1`):",
        "",
        *table(
            ["read", "wall (s)", "peak memory (MiB)", "classes stage (s)", "V found / true", "S found / true"],
            [
                [
                    how,
                    f"{d['wall_s']:.1f}",
                    f"{d['peak_rss_mib']:.0f}",
                    f"{d['classes_s']:.2f}",
                    f"{d['counts']['V']} / {result['day']['truth']['V']}",
                    f"{d['counts']['S']} / {result['day']['truth']['S']}",
                ]
                for how, d in result["day"].items()
                if how != "truth"
            ],
        ),  # fmt: skip
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = p.parse_args(argv)
    result = run(args.data)
    write_results(args.out, "beat_classes", result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
