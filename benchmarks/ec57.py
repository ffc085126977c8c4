"""An ANSI/AAMI EC57-style evaluation of beats, ventricular (V) and supraventricular (S) classes and
atrial fibrillation (AF), per record and gross, on every labelled real recording in ../shared/data
and on the simulator, beside the peers' beat detection on the same records and de Chazal et al.'s
published figures.

Each record is analysed as ``devicepipe beats RECORD`` analyses it with its defaults: the leads
named as ECG leads read together, beats found on all of them at once, every beat classed on every
lead (:func:`devicepipe.ecg.ecg_classes_leads`), the Holter summary made of them
(:func:`devicepipe.heart.holter.holter_summary`, no pause across a stretch with no signal). Scoring
(EC57): a detection matches a reference beat within 150 ms, each at most once, the first and last
0.5 s not scored. Per class k: Se = reference beats of k matched and classed k over the reference
beats of k; +P = those over the matched beats classed k; the false-positive rate = the matched beats
of other classes classed k over them. AF, as CPSC 2021 scores it: each matched reference beat inside
or outside an ``(AFIB`` episode against whether we put it in one (Se and Sp per beat); and the
record's kind: no AF, persistent AF (one episode over the whole record) or paroxysmal AF (anything
else).

Reference labels: MIT-BIH 100's and CPSC 2021's ``.atr`` (every AAMI class; CPSC 2021's rhythm in
its ``aux_note``); ``mitdb_v``'s ``REC_beats.csv`` (V exact, N covering record 200's 30 atrial
premature and 2 fusion beats: S is not scored there). MIT-BIH 100, 105, 106 and 200 hold no AF.

    python benchmarks/ec57.py [--data DIR] [--out DIR] [--no-peers]
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from results_io import machine, parser, table, write_results  # beside this script

from devicepipe.ecg import aami_class, classes, ecg_peaks
from devicepipe.ecg.classes import BeatClasses
from devicepipe.ecg.flat import flat_stretches
from devicepipe.ecg.several_leads import ecg_classes_leads
from devicepipe.heart.holter import Holter, holter_summary
from devicepipe.io import read_series
from devicepipe.io.channels import choose_signal
from devicepipe.io.wfdb import read_beat_annotations
from devicepipe.simulate import Rhythm, simulate_ecg

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: For context only (other data, other beats): de Chazal, O'Dwyer and Reilly, IEEE TBME 51(7),
#: 2004, inter-patient results on MIT-BIH's DS2, percent.
PUBLISHED = {
    "source": "de Chazal et al. 2004, MIT-BIH DS2 (inter-patient)",
    "V_se_pct": 77.7,
    "V_ppv_pct": 81.9,
    "S_se_pct": 75.9,
    "S_ppv_pct": 38.5,
}
TOLERANCE_S = 0.15
EDGE_S = 0.5
KINDS = ("no AF", "paroxysmal AF", "persistent AF")
#: The Holter events of ventricular beats scored against the reference's, and how near in time (s)
#: one of ours must start to find one of the reference's (about a beat).
EVENT_KINDS = ("couplet", "run", "bigeminy", "trigeminy")
EVENT_TOLERANCE_S = 1.0
#: A reference beat this close (s) after the one before comes where that beat's T wave is: counted
#: apart, with how many we find (CPSC 2021's blocked atrial premature beats, no QRS after them).
CLOSE_S = 0.3
#: Shares of the on-time normal beats' QRS spread tried for the classes' altered-QRS rule (they use
#: ``ALTERED_QUANTILE``): how far the V and S figures move with the choice.
ALTERED_SHARES = (0.02, 0.03, 0.05, 0.10)


@dataclass(frozen=True)
class Truth:
    """A record's reference: R peaks (samples), each beat's AAMI class ("" where not scored), the
    classes that the labels give exactly, and each beat's rhythm (True: inside AF)."""

    samples: np.ndarray
    classes: np.ndarray
    exact: tuple[str, ...]
    in_af: np.ndarray


@dataclass(frozen=True)
class Analysed:
    """What ``devicepipe beats`` finds in a record with its defaults."""

    peaks: np.ndarray
    classes: BeatClasses
    holter: Holter
    fs: float
    n_samples: int
    first_lead: np.ndarray


def analyse_signal(x: torch.Tensor, fs: float) -> Analysed:
    """Beats, classes and Holter summary of ``x`` (``(time,)`` or ``(leads, time)``), as the
    pipelines find them (fused detection on several leads, every lead classed)."""
    peaks = ecg_peaks(x, fs, leads="fuse") if x.ndim == 2 else ecg_peaks(x, fs)
    classes = ecg_classes_leads(x, peaks, fs)
    t = peaks.numpy().astype(np.float64) / fs
    n = x.shape[-1]
    holter = holter_summary(t, classes.labels, classes.irregular, n / fs, classes.not_beats, flat_stretches(x, fs))
    first = (x if x.ndim == 1 else x[0]).numpy()
    return Analysed(peaks.numpy(), classes, holter, fs, n, first)


def analyse(path: Path) -> Analysed:
    """A WFDB record analysed as ``devicepipe beats`` does by default."""
    leads = choose_signal(path).leads
    rec = read_series(path, list(leads) if len(leads) > 1 else None)
    return analyse_signal(rec.samples.float(), float(rec.sampling_rate))


def truth_of(group: str, path: Path) -> Truth:
    """The reference of a record of the shared data (see the module)."""
    if group == "mitdb_v":
        rows = np.loadtxt(path.parent / f"{path.name}_beats.csv", delimiter=",", skiprows=1, dtype=str)
        samples = rows[:, 0].astype(np.int64)
        return Truth(samples, rows[:, 1], ("V",), np.zeros(samples.size, bool))
    ann = read_beat_annotations(path)
    classes = np.array([aami_class(s) or "" for s in ann.symbols.astype(str)])
    in_af = np.zeros(ann.samples.size, bool)
    if group == "cpsc2021":
        import wfdb

        full = wfdb.rdann(str(path), "atr")
        changes = [(int(s), a.strip()) for s, a in zip(full.sample, full.aux_note, strict=True)
                   if a.strip() in ("(AFIB", "(AFL", "(N")]  # fmt: skip
        state, at = False, 0
        for s, a in changes + [(np.iinfo(np.int64).max, "(N")]:
            if state:
                in_af |= (ann.samples >= at) & (ann.samples < s)
            state, at = a in ("(AFIB", "(AFL"), s
    return Truth(ann.samples, classes, ("N", "S", "V", "F", "Q"), in_af)


def match(truth: np.ndarray, found: np.ndarray, fs: float, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """EC57 matching: the scored reference beats (indices), the detection each matches (-1: none),
    and the scored detections that match no reference beat (indices)."""
    lo, hi = EDGE_S * fs, n - EDGE_S * fs
    scored = np.flatnonzero((truth >= lo) & (truth < hi))
    best = np.full(scored.size, -1)
    taken = np.zeros(found.size, bool)
    at = np.searchsorted(found, truth[scored])
    for j, (t, k) in enumerate(zip(truth[scored], at, strict=True)):
        near = [i for i in (k - 1, k, k + 1) if 0 <= i < found.size and not taken[i]
                and abs(int(found[i]) - int(t)) <= TOLERANCE_S * fs]  # fmt: skip
        if near:
            best[j] = min(near, key=lambda i: abs(int(found[i]) - int(t)))
            taken[best[j]] = True
    extra = np.flatnonzero(~taken & (found >= lo) & (found < hi))
    return scored, best, extra


def kind_of(af_beats: np.ndarray) -> str:
    """A record's kind from whether each of its beats is in AF, as CPSC 2021 scores it."""
    if not af_beats.any():
        return KINDS[0]
    return KINDS[2] if af_beats.all() else KINDS[1]


def score(a: Analysed, truth: Truth) -> dict[str, Any]:
    """A record's figures: detection, per-class counts, AF per beat and the record's kind."""
    scored, best, extra = match(truth.samples, a.peaks, a.fs, a.n_samples)
    tp, fn, fp = int((best >= 0).sum()), int((best < 0).sum()), int(extra.size)
    det = {"tp": tp, "fp": fp, "fn": fn, "sensitivity": tp / max(tp + fn, 1), "ppv": tp / max(tp + fp, 1),
           "f1": 2 * tp / max(2 * tp + fp + fn, 1)}  # fmt: skip
    ref = truth.classes[scored]
    gap = np.diff(truth.samples, prepend=truth.samples[0] - a.n_samples)[scored] / a.fs
    close = gap < CLOSE_S
    got = np.where(best >= 0, a.classes.labels[np.clip(best, 0, None)], "-")
    classes = {}
    for k in truth.exact:
        if k not in ("V", "S"):
            continue
        known = ref != ""
        classes[k] = {
            "truth": int(np.sum(ref == k)),
            "missed": int(np.sum((ref == k) & (best < 0))),
            "close": int(np.sum((ref == k) & close)),  # under CLOSE_S after the reference beat before
            "close_found": int(np.sum((ref == k) & close & (best >= 0))),
            "tp": int(np.sum((ref == k) & (got == k))),
            "given": int(np.sum(known & (got == k))),
            "others": int(np.sum(known & (ref != k) & (best >= 0))),
            "others_given": int(np.sum(known & (ref != k) & (got == k))),
            "unmatched_given": int(np.sum(a.classes.labels[extra] == k)),
            # what the reference's beats of k were called instead ("-": never detected)
            "called": {c: int(np.sum((ref == k) & (got == c))) for c in ("N", "S", "V", "F", "Q", "-")},
        }
    in_af = np.zeros(a.peaks.size, bool)  # (the rhythm labels: a run inside AF is labelled (VT)
    for e in a.holter.of("afib"):
        in_af[e.first_beat : e.last_beat + 1] = True
    truth_af = truth.in_af[scored][best >= 0]
    ours_af = in_af[best[best >= 0]]
    # the record's kind from every detected beat inside the scored span
    span = (a.peaks >= EDGE_S * a.fs) & (a.peaks < a.n_samples - EDGE_S * a.fs)
    af = {
        "truth_af_beats": int(truth_af.sum()),
        "af_tp": int((truth_af & ours_af).sum()),
        "truth_other_beats": int((~truth_af).sum()),
        "other_tn": int((~truth_af & ~ours_af).sum()),
        "kind_truth": kind_of(truth.in_af[scored]),
        "kind_ours": kind_of(in_af[span]) if span.any() else KINDS[0],
        "af_share_ours": a.holter.af_share,
        "episodes_ours": [(round(e.start_s, 1), round(e.end_s, 1)) for e in a.holter.of("afib")],
    }
    events = events_against(a, truth) if "V" in truth.exact else {}
    return {"beats": det, "classes": classes, "af": af, "counts": a.classes.counts(), "events": events}


def events_against(a: Analysed, truth: Truth) -> dict[str, dict[str, int]]:
    """Each kind of ventricular event (:data:`EVENT_KINDS`): how many the reference's beats make
    (the Holter summary of its own beats, V where the reference says V, inside AF where it says
    so), how many we report, and how many of the reference's one of ours of the kind starts within
    :data:`EVENT_TOLERANCE_S` of."""
    t = truth.samples / a.fs
    labels = np.where(truth.classes == "V", "V", "N")
    reference = holter_summary(t, labels, truth.in_af, a.n_samples / a.fs, np.zeros(t.size, bool))
    out = {}
    for kind in EVENT_KINDS:
        ref, ours = reference.of(kind), a.holter.of(kind)
        starts = np.array([e.start_s for e in ours])
        found = sum(bool(starts.size) and bool(np.min(np.abs(starts - e.start_s)) <= EVENT_TOLERANCE_S) for e in ref)
        out[kind] = {"truth": len(ref), "ours": len(ours), "found": int(found)}
    return out


def peers(a: Analysed, truth: Truth) -> dict[str, float]:
    """The peers' beat F1 on the record's first lead (the detectors of benchmarks/ecg_peers.py)."""
    from ecg_peers import neurokit, sleepecg, xqrs

    out = {}
    for name, detect in (("neurokit2", neurokit), ("sleepecg", sleepecg), ("wfdb-xqrs", xqrs)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = np.unique(detect(a.first_lead.astype(np.float64), a.fs))
        scored, best, extra = match(truth.samples, found, a.fs, a.n_samples)
        tp, fn, fp = int((best >= 0).sum()), int((best < 0).sum()), int(extra.size)
        out[name] = 2 * tp / max(2 * tp + fp + fn, 1)
    return out


def labelled_records(data: Path) -> list[tuple[str, str, Path]]:
    """(group, name, path) of every record of the shared data with reference beat labels."""
    out = [("mitdb", "100", data / "mitdb" / "100")]
    out += [("mitdb_v", r, data / "mitdb_v" / r) for r in ("105", "106", "200")]
    out += [("cpsc2021", h.stem, h.with_suffix("")) for h in sorted((data / "cpsc2021").glob("*.hea"))]
    return [r for r in out if r[2].with_suffix(".hea").exists()]


#: Simulated 30-minute recordings (name -> rhythm, rate, noise in mV): every burden, AF and
#: ventricular tachycardia.
SIMULATED = {
    "V 1 %": (Rhythm(ectopic_rate=0.01), 360.0, 0.05),
    "V trigeminy": (Rhythm(trigeminy=0.6, ectopic_rate=0.06), 250.0, 0.05),
    "V bigeminy": (Rhythm(bigeminy=1.0), 500.0, 0.05),
    "S 10 %": (Rhythm(atrial_rate=0.1), 360.0, 0.05),
    "AF 20 %": (Rhythm(afib=0.2, ectopic_rate=0.01), 250.0, 0.05),
    "VT 10 %": (Rhythm(vt=0.1, ectopic_rate=0.01), 360.0, 0.05),
    "VT 220 bpm, 5 %": (Rhythm(vt=0.05, vt_bpm=220.0, ectopic_rate=0.01), 250.0, 0.05),
}


def simulated(name: str, seed: int) -> dict[str, Any]:
    rhythm, fs, noise = SIMULATED[name]
    sim = simulate_ecg(1800, fs, noise_mV=noise, rhythm=rhythm, seed=seed)
    truth = Truth(sim.r_peaks.numpy(), sim.classes, ("N", "S", "V"), sim.rhythms == "AFIB")
    return score(analyse_signal(sim.signal.float(), fs), truth)


def gross(records: dict[str, dict[str, Any]], names: list[str], k: str) -> dict[str, Any]:
    """Class ``k``'s counts added over ``names``, with Se, +P and the worst record's FPR."""
    keys = ("truth", "missed", "close", "close_found", "tp", "given", "others", "others_given", "unmatched_given")
    c = {f: sum(records[n]["classes"][k][f] for n in names if k in records[n]["classes"]) for f in keys}
    c["sensitivity"] = c["tp"] / c["truth"] if c["truth"] else None
    c["ppv"] = c["tp"] / c["given"] if c["given"] else None
    fprs = [records[n]["classes"][k]["others_given"] / max(records[n]["classes"][k]["others"], 1)
            for n in names if k in records[n]["classes"]]  # fmt: skip
    c["worst_fpr"] = max(fprs) if fprs else None
    return c


def altered_share_sweep(data: Path) -> list[dict[str, Any]]:
    """Gross V over MIT-BIH 105, 106, 200 and S over CPSC 2021 with each of :data:`ALTERED_SHARES`
    in place of the classes' ``ALTERED_QUANTILE``."""
    chosen, out = classes.ALTERED_QUANTILE, []
    labelled = [(f"{g}/{n}", g, p) for g, n, p in labelled_records(data) if g in ("mitdb_v", "cpsc2021")]
    try:
        for share in ALTERED_SHARES:
            classes.ALTERED_QUANTILE = share
            records = {key: score(analyse(p), truth_of(g, p)) for key, g, p in labelled}
            v = gross(records, [k for k in records if k.startswith("mitdb_v/")], "V")
            s = gross(records, [k for k in records if k.startswith("cpsc2021/")], "S")
            out.append({"share": share, "chosen": share == chosen, "V (mitdb_v 105, 106, 200)": v, "S (cpsc2021)": s})
    finally:
        classes.ALTERED_QUANTILE = chosen
    return out


def run(data: Path, with_peers: bool = True) -> dict[str, Any]:
    torch.set_num_threads(1)
    records: dict[str, dict[str, Any]] = {}
    for group, name, path in labelled_records(data):
        a, truth = analyse(path), truth_of(group, path)
        records[f"{group}/{name}"] = {**score(a, truth), **({"peers_f1": peers(a, truth)} if with_peers else {})}
    sims = {name: simulated(name, seed=11 + i) for i, name in enumerate(SIMULATED)}
    v_names = [n for n in records if n.startswith("mitdb_v/")]
    s_names = [n for n in records if n.startswith("cpsc2021/")]
    s_all = [n for n in records if n.startswith(("cpsc2021/", "mitdb/"))]
    beats = {f: sum(records[n]["beats"][f] for n in records) for f in ("tp", "fp", "fn")}
    beats["sensitivity"] = beats["tp"] / max(beats["tp"] + beats["fn"], 1)
    beats["ppv"] = beats["tp"] / max(beats["tp"] + beats["fp"], 1)
    af_names = list(records)
    af = {f: sum(records[n]["af"][f] for n in s_names) for f in ("truth_af_beats", "af_tp", "truth_other_beats",
                                                                 "other_tn")}  # fmt: skip
    af["sensitivity"] = af["af_tp"] / max(af["truth_af_beats"], 1)
    af["specificity"] = af["other_tn"] / max(af["truth_other_beats"], 1)
    af["kinds_right"] = sum(records[n]["af"]["kind_ours"] == records[n]["af"]["kind_truth"] for n in af_names)
    af["kinds_of"] = len(af_names)
    return {
        **machine(),
        "torch_threads": 1,
        "records": records,
        "simulated": sims,
        "gross": {
            "beats (every labelled record)": beats,
            "V (mitdb_v 105, 106, 200)": gross(records, v_names, "V"),
            "S (mitdb 100, cpsc2021)": gross(records, s_all, "S"),
            "S (cpsc2021)": gross(records, s_names, "S"),
            "V (cpsc2021)": gross(records, s_names, "V"),
            "AF (cpsc2021 beats; kinds over every record)": af,
        },
        "published": PUBLISHED,
        "altered_share": altered_share_sweep(data),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def markdown(result: dict[str, Any]) -> str:
    lines = ["# EC57-style evaluation: beats, V, S and AF per record", "",
             f"{result['date']}, commit `{result['commit']}`, {result['cpu']}, torch threads 1. "
             "Each record analysed as `devicepipe beats RECORD` does by default (every ECG lead; see "
             "`benchmarks/ec57.py`). Matching within 150 ms, 0.5 s edges not scored.", ""]  # fmt: skip
    rows = []
    for name, r in {**result["records"], **{f"sim: {k}": v for k, v in result["simulated"].items()}}.items():
        b, v, s, af = r["beats"], r["classes"].get("V"), r["classes"].get("S"), r["af"]
        peers = r.get("peers_f1", {})
        best = max(peers.values()) if peers else None
        vse = None if not v or not v["truth"] else v["tp"] / v["truth"]
        vppv = None if not v or not v["given"] else v["tp"] / v["given"]
        vfpr = None if not v or not v["others"] else v["others_given"] / v["others"]
        sse = None if not s or not s["truth"] else s["tp"] / s["truth"]
        sppv = None if not s or not s["given"] else s["tp"] / s["given"]
        afse = af["af_tp"] / af["truth_af_beats"] if af["truth_af_beats"] else None
        afsp = af["other_tn"] / af["truth_other_beats"] if af["truth_other_beats"] else None
        rows.append([name, f"{b['f1']:.4f}", "-" if best is None else f"{best:.4f}", b["fn"], b["fp"],
                     f"{v['truth']}" if v else "-", _pct(vse), _pct(vppv), _pct(vfpr),
                     f"{s['truth']}" if s else "-", _pct(sse), _pct(sppv), _pct(afse), _pct(afsp),
                     af["kind_truth"], af["kind_ours"]])  # fmt: skip
    lines += table(["record", "beats F1", "best peer F1", "missed", "false", "V", "V Se", "V +P", "V FPR", "S",
                    "S Se", "S +P", "AF Se", "AF Sp", "AF kind (truth)", "AF kind (ours)"], rows)  # fmt: skip
    lines += ["", "## Gross", ""]
    grows = []
    for name, c in result["gross"].items():
        if "missed" in c:
            grows.append([name, c["truth"], c["missed"], f"{c['close']} ({c['close_found']})", _pct(c["sensitivity"]),
                          _pct(c["ppv"]), _pct(c["worst_fpr"])])  # fmt: skip
    lines += table(["class (records)", "reference beats", "never detected",
                    f"under {CLOSE_S:g} s after the beat before (detected)", "Se", "+P", "worst record's FPR"],
                   grows)  # fmt: skip
    b = result["gross"]["beats (every labelled record)"]
    lines += ["", f"Beats over every labelled record: {b['tp']:,} found, {b['fn']:,} missed, {b['fp']:,} false; "
              f"Se {_pct(b['sensitivity'])}, +P {_pct(b['ppv'])}."]  # fmt: skip
    af = result["gross"]["AF (cpsc2021 beats; kinds over every record)"]
    lines += ["", f"AF, CPSC 2021 beats: Se {_pct(af['sensitivity'])}, Sp {_pct(af['specificity'])}; the record's "
              f"kind right on {af['kinds_right']} of {af['kinds_of']} records.", "",
              f"For context (other beats, other data): {PUBLISHED['source']}: V Se {PUBLISHED['V_se_pct']} %, "
              f"+P {PUBLISHED['V_ppv_pct']} %; S Se {PUBLISHED['S_se_pct']} %, +P {PUBLISHED['S_ppv_pct']} %.",
              ""]  # fmt: skip
    lines += ["## Ventricular events", "",
              "The reference's events are those its own beats make (the Holter summary of its beats, V where it "
              "says V); one is found where one of ours of the kind starts within "
              f"{EVENT_TOLERANCE_S:g} s. Records whose reference gives V exactly.", ""]  # fmt: skip
    erows = []
    for name, r in result["records"].items():
        ev = r.get("events") or {}
        if ev and any(ev[k]["truth"] or ev[k]["ours"] for k in EVENT_KINDS):
            erows.append([name, *(f"{ev[k]['found']} of {ev[k]['truth']} ({ev[k]['ours']})" for k in EVENT_KINDS)])
    heads = {"couplet": "couplets", "run": "runs", "bigeminy": "bigeminy episodes", "trigeminy": "trigeminy episodes"}
    lines += table(["record", *(f"{heads[k]}: found of the reference's (ours)" for k in EVENT_KINDS)], erows)
    lines += [""]
    lines += ["## The altered-QRS share", "",
              "An early beat is V where its QRS is less like the normal shape than all but this share of "
              "the on-time normal beats are (with a ventricular family in the recording and no ectopic P "
              "wave); the classes use the share marked.", ""]  # fmt: skip
    srows = []
    for r in result.get("altered_share", []):
        v, s = r["V (mitdb_v 105, 106, 200)"], r["S (cpsc2021)"]
        srows.append([f"{100 * r['share']:g} %" + (" (used)" if r["chosen"] else ""), _pct(v["sensitivity"]),
                      _pct(v["ppv"]), _pct(v["worst_fpr"]), _pct(s["sensitivity"]), _pct(s["ppv"])])  # fmt: skip
    lines += table(["share", "V Se (105, 106, 200)", "V +P", "worst record's V FPR", "S Se (CPSC 2021)", "S +P"], srows)
    lines += [""]
    return "\n".join(lines)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    p.add_argument("--no-peers", action="store_true", help="skip the peers' detection")
    args = p.parse_args()
    result = run(args.data, not args.no_peers)
    write_results(Path(args.out), "ec57", result, markdown(result))


if __name__ == "__main__":
    main()
