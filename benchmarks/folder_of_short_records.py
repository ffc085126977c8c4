"""A folder of 10,000 10-s 12-lead records (PTB-XL's shape), files to R peaks, against a
``wfdb.rdrecord`` + sleepecg loop: interleaved, one thread each.

    python benchmarks/folder_of_short_records.py [--records 10000] [--repeats 15]   # about 40 min on 2 cores
    python benchmarks/folder_of_short_records.py --leads 1                          # about 10 min
    python benchmarks/folder_of_short_records.py --leads 1 --records 1000          # about 2 min


The folder: ``--records`` simulated 10-s ECGs at 500 Hz, written by ``wfdb.wrsamp`` as PTB-XL
stores its records (12 signals in one format-16 file, 1 uV resolution); lead II is the
simulator's ECG, the other leads scaled copies with noise of their own; with ``--leads 1``, lead II
alone (CPSC 2019's shape: the worse case for the ratio, where reading a header costs less). Each side reads lead II
of every record and finds its R peaks:

- ``wfdb.rdrecord + sleepecg loop``: ``wfdb.rdrecord`` and ``sleepecg.detect_heartbeats`` per record;
- ``wfdb.rdrecord + ours, one batched call``: the same reads, then one ``ecg_peaks`` call on the
  records stacked ``(records, time)`` (what our reading added before plain records were read
  without wfdb's header parse);
- ``np.fromfile reader + sleepecg loop``: the least reading there is (:func:`fromfile_reader`:
  the header's rate, gain and baseline taken by splitting its lines, the signal file read by
  ``np.fromfile``; only format 16, one signal file, no checks), then sleepecg per record;
- ``np.fromfile reader + ours, one batched call``: the same reads, then our one call;
- ``read_series per record + ours, one batched call``: ``read_series`` per record (plain WFDB
  records are read without wfdb's header parse, :mod:`devicepipe.io.wfdb_plain`), then the same call;
- ``read_stacked + ours, one batched call`` (ours): the records read into one tensor by
  :func:`devicepipe.io.read_stacked`, which reads plain WFDB records without a ``read_series``
  call each, then the same call.

With ``--same-cores``, the comparison on the machine's two cores: the loop split over two
processes (forked and warm before timing, half of the records each) against ours with torch at
two threads (its reading stays one Python loop).

Each repeat runs the sides once, in an order rotated from one repeat to the next, after a
warm-up call each (the files are then in the page cache for every side alike); ratios are
taken within a repeat and reported as the median with a bootstrap 95 % interval (quote the lower
bound). Outputs: every side of ours must find the same peaks (the values read are the same), and every
side is scored against the simulator's truth (F1, 150 ms, the first and last 0.5 s not scored).

Results: ``benchmarks/results/folder_of_short_records.{json,md}`` (``folder_of_short_records_one_lead``
with ``--leads 1``; ``..._same_cores`` added with ``--same-cores``, ``..._N_records`` with another
``--records``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its OpenMP runtime

import multiprocessing as mp  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import sleepecg  # noqa: E402
import torch  # noqa: E402
from results_io import heading, machine, parser, table, write_results  # noqa: E402

import devicepipe as dp  # noqa: E402
from devicepipe.bench.paired import Contender, paired  # noqa: E402
from devicepipe.ecg import ecg_peaks, evaluate_beats  # noqa: E402
from devicepipe.io import read_series, read_stacked  # noqa: E402
from devicepipe.io.wfdb import import_wfdb  # noqa: E402

FS = 500.0
SECONDS = 10.0
LEADS = ["I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6"]


def write_folder(root: Path, n: int, leads: list[str]) -> list[np.ndarray]:
    """``n`` records of ``leads`` in ``root`` (``r00000.hea``/``.dat``, ...); the true R peaks of each."""
    wfdb = import_wfdb()
    truth = []
    lead_ii = leads.index("II")
    gains = np.random.default_rng(0).uniform(0.3, 1.2, len(leads))
    gains[lead_ii] = 1.0
    for i in range(n):
        sim = dp.simulate_ecg(SECONDS, FS, seed=i, noise_mV=0.03)
        lead = sim.signal.numpy().astype(np.float64)
        noise = np.random.default_rng(i).normal(0.0, 0.02, (lead.size, len(leads)))
        noise[:, lead_ii] = 0.0
        signals = np.clip(lead[:, None] * gains[None, :] + noise, -32.0, 32.0)
        wfdb.wrsamp(
            f"r{i:05d}", fs=FS, units=["mV"] * len(leads), sig_name=leads, p_signal=signals,
            fmt=["16"] * len(leads), adc_gain=[1000.0] * len(leads), baseline=[0] * len(leads), write_dir=str(root),
        )  # fmt: skip
        truth.append(sim.r_peaks.numpy())
    return truth


def fromfile_reader(head: Path, lead: int) -> tuple[np.ndarray, float]:
    """Signal ``lead`` of a format-16 WFDB record in physical units (float32, as ``wfdb.rdrecord(...,
    return_res=32)`` computes them) and its rate: the least reading there is, with no checks."""
    lines = [ln.split() for ln in head.read_text().splitlines() if ln and not ln.startswith("#")]
    fs, n_sig = float(lines[0][2]), int(lines[0][1])
    gain, baseline = lines[1 + lead][2].split("/")[0].split("(")
    digital = np.fromfile(head.with_name(lines[1 + lead][0]), dtype="<i2").reshape(-1, n_sig)[:, lead]
    physical = digital.astype(np.float32)  # wfdb.Record.dac's steps
    np.subtract(physical, [int(baseline.rstrip(")"))], physical)
    np.divide(physical, [float(gain)], physical)
    return physical, fs


_SHARED: dict[str, Any] = {}  # what forked loop processes read (set before the pool starts)


def _loop(share: list[str]) -> list[np.ndarray]:
    """The wfdb.rdrecord + sleepecg loop over ``share`` (record paths), in a worker process."""
    wfdb, lead = import_wfdb(), _SHARED["lead"]
    return [sleepecg.detect_heartbeats(wfdb.rdrecord(b, channels=[lead]).p_signal[:, 0], FS) for b in share]


def f1(found: list[Any], truth: list[np.ndarray], n_samples: int) -> float:
    """F1 of ``found`` (R peaks per record) against ``truth``, pooled over the records."""
    tp = fp = fn = 0
    for peaks, true in zip(found, truth, strict=True):
        got = np.asarray(peaks.numpy() if isinstance(peaks, torch.Tensor) else peaks)
        score = evaluate_beats(true, got, FS, n_samples=n_samples)
        tp, fp, fn = tp + score.tp, fp + score.fp, fn + score.fn
    return 2 * tp / max(2 * tp + fp + fn, 1)


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--records", type=int, default=10_000)
    options.add_argument("--repeats", type=int, default=15)
    options.add_argument("--leads", type=int, choices=[1, 12], default=12)
    options.add_argument("--same-cores", action="store_true", help="the loop in 2 processes, ours at 2 threads")
    args = options.parse_args()
    leads = LEADS if args.leads == 12 else ["II"]
    lead = leads.index("II")
    torch.set_num_threads(1)
    wfdb = import_wfdb()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        truth = write_folder(root, args.records, leads)
        bases = [str(root / f"r{i:05d}") for i in range(args.records)]
        heads = [Path(b + ".hea") for b in bases]

        def peer() -> list[np.ndarray]:
            return [sleepecg.detect_heartbeats(wfdb.rdrecord(b, channels=[lead]).p_signal[:, 0], FS) for b in bases]

        def wfdb_then_ours() -> list[torch.Tensor]:
            rows = [wfdb.rdrecord(b, channels=[lead], return_res=32).p_signal[:, 0] for b in bases]
            return ecg_peaks(torch.from_numpy(np.stack(rows)), FS)

        def fromfile_peer() -> list[np.ndarray]:
            return [sleepecg.detect_heartbeats(fromfile_reader(h, lead)[0].astype(np.float64), FS) for h in heads]

        def fromfile_then_ours() -> list[torch.Tensor]:
            return ecg_peaks(torch.from_numpy(np.stack([fromfile_reader(h, lead)[0] for h in heads])), FS)

        def one_by_one() -> list[torch.Tensor]:
            return ecg_peaks(torch.stack([read_series(h, "II", device="cpu").samples for h in heads]), FS)

        def ours() -> list[torch.Tensor]:
            return ecg_peaks(read_stacked(heads, "II", device="cpu").samples, FS)

        scores: dict[str, float] = {}

        def check(found: dict[str, Any]) -> None:
            if not args.same_cores:
                mine = found[labels[-1]]
                for other in (labels[1], labels[3], labels[4]):
                    if not all(torch.equal(a, b) for a, b in zip(mine, found[other], strict=True)):
                        raise SystemExit(f"{other!r} and ours found different peaks: the values read differ")
            scores.update({label: round(f1(v, truth, int(SECONDS * FS)), 4) for label, v in found.items()})

        if args.same_cores:
            _SHARED["lead"] = lead
            halves = [bases[0::2], bases[1::2]]
            with mp.get_context("fork").Pool(2) as pool:
                pool.map(_loop, [h[:2] for h in halves])  # started and warm before timing

                def peer_in_two() -> list[np.ndarray]:
                    first, second = pool.map(_loop, halves)
                    return [p for pair in zip(first, second, strict=False) for p in pair] + first[len(second) :]

                labels = [
                    "wfdb.rdrecord + sleepecg loop, 2 processes",
                    "read_stacked + ours, one batched call, 2 threads",
                ]
                record = paired(
                    [Contender("peer", labels[0], peer_in_two), Contender("ours", labels[1], ours)],
                    repeats=args.repeats,
                    threads=2,
                    check=check,
                )
        else:
            labels = ["wfdb.rdrecord + sleepecg loop", "wfdb.rdrecord + ours, one batched call"]
            labels += ["np.fromfile reader + sleepecg loop", "np.fromfile reader + ours, one batched call"]
            labels += ["read_series per record + ours, one batched call", "read_stacked + ours, one batched call"]
            record = paired(
                [
                    Contender("peer", labels[0], peer),
                    Contender("ours, reading through wfdb", labels[1], wfdb_then_ours),
                    Contender("the least reading + sleepecg", labels[2], fromfile_peer),
                    Contender("ours, the least reading", labels[3], fromfile_then_ours),
                    Contender("ours, a read_series call per record", labels[4], one_by_one),
                    Contender("ours", labels[5], ours),
                ],
                repeats=args.repeats,
                threads=1,
                check=check,
            )
    result = {
        **machine(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "same_cores": args.same_cores,
        "records": args.records,
        "record": {"seconds": SECONDS, "hz": FS, "leads": len(leads), "format": "16", "detected_lead": "II"},
        "f1": scores,
        **record,
    }
    ratios = {r["versus"]: r for r in record["ratios"]}
    shape = "12-lead" if len(leads) == 12 else "one-lead"
    cores = "2 cores: the loop in 2 processes, ours at 2 threads" if args.same_cores else "1 thread"
    where = "12 leads in one format-16 file each (PTB-XL's shape)" if len(leads) == 12 else "one lead, format 16"
    lines = [
        heading(f"A folder of short {shape} records, files to R peaks", result, result["cpu"], cores),
        "",
        f"{args.records:,} records of {SECONDS:g} s at {FS:g} Hz, {where}, lead II read and detected. "
        f"{args.repeats} repeats in rotated order after a warm-up; ratio = "
        "that side's time / ours (`read_stacked` + one batched call) within a repeat, median and bootstrap 95 % "
        "interval (quote the lower bound); F1 against the simulator's truth."
        + ("" if args.same_cores else " Every side of ours found the same peaks."),
        "",
        *table(
            ["side", "seconds (median)", "ms per record", "its time / ours", "95 % interval", "F1"],
            [
                [c["label"], f"{c['median_s']:.2f}", f"{1000 * c['median_s'] / args.records:.3f}"]
                + (
                    [f"{ratios[c['label']]['median']:.2f}x", "{:.2f}-{:.2f}".format(*ratios[c["label"]]["ci95"])]
                    if c["label"] in ratios
                    else ["1", ""]
                )
                + [f"{scores[c['label']]:.4f}"]
                for c in record["contenders"]
            ],
        ),
    ]
    name = (
        "folder_of_short_records"
        + ("" if len(leads) == 12 else "_one_lead")
        + ("_same_cores" if args.same_cores else "")
        + ("" if args.records == 10_000 else f"_{args.records}_records")
    )
    write_results(args.out, name, result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
