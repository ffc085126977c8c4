"""Run the benchmarks, write JSON + Markdown + charts, and compare two result files."""

from __future__ import annotations

import datetime
import importlib
import json
import os
import platform
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from markdown_it import MarkdownIt
from markupsafe import Markup

from devicepipe.bench.baselines import run_baselines
from devicepipe.bench.ddp import ddp_scaling
from devicepipe.bench.interop import handoff_comparison
from devicepipe.bench.limits import annotate, measure_limits
from devicepipe.bench.micro import crossover, run_micro
from devicepipe.bench.paired import detection_sweep, run_paired
from devicepipe.bench.stages import STAGES, prepare_input, run_stages
from devicepipe.bench.timer import measure
from devicepipe.device import device_report, resolve_device
from devicepipe.ecg import evaluate_beats
from devicepipe.errors import DevicepipeError
from devicepipe.io import atomic_path, write_json
from devicepipe.plot import new_figure, save_figure
from devicepipe.report import REPORT_NAME
from devicepipe.report import write_report as write_page

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "SECTIONS",
    "achieved_cells",
    "bench_devices",
    "check_only",
    "compare",
    "format_ratio",
    "format_seconds",
    "load_result",
    "run_benchmarks",
    "write_report",
]

SECTIONS = ("stages", "baselines", "paired", "micro", "crossover", "peers", "handoff", "ddp")


def _versions() -> dict[str, str | None]:
    out = {}
    for name in ("torch", "numpy", "pyarrow", "pandas", "sklearn", "numba", "neurokit2", "sleepecg", "wfdb"):
        try:
            out[name] = getattr(importlib.import_module(name), "__version__", None)
        except Exception:
            out[name] = None
    return out


def _peers(inp: Any, repeats: int, note: Callable[[str], None]) -> list[dict[str, Any]]:

    records = []
    for name in ("neurokit2", "sleepecg"):
        note(f"peer: {name}")
        try:
            if name == "neurokit2":
                import neurokit2 as nk

                def run() -> np.ndarray:
                    cleaned = nk.ecg_clean(inp.signal, sampling_rate=inp.sampling_rate)
                    return np.asarray(nk.ecg_peaks(cleaned, sampling_rate=inp.sampling_rate)[1]["ECG_R_Peaks"])
            else:
                import sleepecg

                def run() -> np.ndarray:
                    return np.asarray(sleepecg.detect_heartbeats(inp.signal.astype(np.float64), inp.sampling_rate))
        except ImportError as exc:
            records.append({"peer": name, "skipped": f"not installed ({exc}); pip install devicepipe[bench]"})
            continue
        t = measure(run, device="cpu", repeats=1)
        f1 = evaluate_beats(inp.truth, run(), inp.sampling_rate, tolerance_s=0.05, n_samples=inp.n_samples).f1
        records.append(
            {
                "peer": name,
                "n_samples": inp.n_samples,
                **t.to_dict(),
                "samples_per_s": inp.n_samples / t.median_s,
                "f1_vs_truth": f1,
            }
        )
    return records


def bench_devices(names: list[str] | None = None) -> list[torch.device]:
    """The devices to benchmark: each of ``names`` (an unavailable one is an error), or by
    default the CPU and, where there is one, the current CUDA device."""
    if not names:
        names = ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
    return [resolve_device(name) for name in names]


def check_only(only: list[str]) -> list[str]:
    """``only`` as given, or an error naming the first entry that is neither a section nor a stage."""
    unknown = [w for w in only if w not in SECTIONS and w not in STAGES]
    if unknown:
        raise DevicepipeError(f"unknown benchmark {unknown[0]!r}; choose from {list(SECTIONS) + list(STAGES)}.")
    return only


def run_benchmarks(
    devices: list[torch.device],
    *,
    quick: bool = False,
    only: list[str] | None = None,
    n_samples: int | None = None,
    repeats: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Everything ``devicepipe bench`` measures, as one JSON-serialisable dict."""

    note = progress or (lambda _m: None)
    n = n_samples or (200_000 if quick else 20_000_000)
    reps = repeats or (1 if quick else 5)
    stage_names = [s for s in (check_only(only) if only else STAGES) if s in STAGES]
    sections = (
        set(SECTIONS) if not only else {s for s in only if s in SECTIONS} | ({"stages"} if stage_names else set())
    )
    result: dict[str, Any] = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": device_report(),
        "platform": platform.platform(),
        "threads": torch.get_num_threads(),
        # whether PyTorch backs large CPU buffers with huge pages (the CLI asks for it)
        "huge_pages": os.environ.get("THP_MEM_ALLOC_ENABLE", "").upper() in ("1", "ON", "YES", "TRUE", "Y"),
        "versions": _versions(),
        "devices": [str(d) for d in devices],
        "quick": quick,
        "n_samples": n,
        "repeats": reps,
    }
    with tempfile.TemporaryDirectory() as tmp:
        if sections & {"stages", "baselines", "peers", "paired"}:  # the sections that use the simulated ECG
            note(f"simulating {n:,} samples and writing them as CSV and Parquet")
            inp = prepare_input(n, tmp)
        if "stages" in sections:
            result["stages"] = run_stages(inp, devices, repeats=reps, only=stage_names, progress=note)
            note("this machine's limits: memory copy, matrix product, CSV parsing")
            result["limits"] = measure_limits(devices, inp.csv, quick=quick, repeats=reps)
            annotate(result["stages"], result["limits"])
        if "baselines" in sections:
            result["baselines"] = run_baselines(inp, repeats=reps, progress=note)
        if "peers" in sections:
            result["peers"] = _peers(inp, reps, note)
        if "paired" in sections:
            counts = [1] if quick else None  # quick: one thread only (it checks that everything runs)
            result["paired"] = run_paired(inp, repeats=reps, thread_counts=counts, progress=note)
            result["detection_sweep"] = detection_sweep(inp, repeats=reps, progress=note)
    if "handoff" in sections:
        note("host round trip vs zero-copy handoff")
        result["handoff"] = handoff_comparison(n, repeats=reps)
    if "micro" in sections:
        result["micro"] = run_micro(devices, quick=quick, repeats=3 if quick else 5, progress=note)
    if "crossover" in sections:
        result["crossover"] = crossover(devices, quick=quick, repeats=reps, progress=note)
    if "ddp" in sections:
        result["ddp"] = ddp_scaling(devices, quick=quick, progress=note)
    result["ratios"] = _ratios(result)
    return result


#: Stages where ours and the notebook's way do not do the same work, and how they differ.
DIFFERENT_WORK = {
    "peaks": "ours keeps maxima over a 99-sample neighbourhood, the notebook's kernel over 180",
    "pipeline": "ours detects beats with the Ricker method, the notebook with its curvature suppression",
}


def _ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook way / ours on the CPU, per stage, from the same run."""
    ours = {r["stage"]: r for r in result.get("stages", []) if r["device"] == "cpu"}
    out = []
    for b in result.get("baselines", []):
        mine = ours.get(b.get("versus"))
        if mine is None or "median_s" not in b:
            continue
        out.append(
            {
                "stage": b["versus"],
                "notebook": b["baseline"],
                "notebook_s": b["median_s"],
                "ours_s": mine["median_s"],
                "speedup": b["median_s"] / mine["median_s"],
            }
        )
    return out


def format_seconds(s: float | None) -> str:
    """Seconds as the digits that matter: 35.2 ms, 1.17 s."""
    if s is None:
        return "-"
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


_ms = format_seconds


def _percent(x: float) -> str:
    return f"{100 * x:.0f}%" if x >= 0.1 else f"{100 * x:.2g}%"


def achieved_cells(r: dict[str, Any]) -> list[str]:
    """A stage record's achieved rate and its share of the limit that bounds it, as two table cells."""
    limit = r.get("limit")
    if "text_mb_per_s" in r:
        rate = f"{r['text_mb_per_s']:.3g} MB/s of CSV"
    elif limit == "matmul" and "gflop_s" in r:
        rate = f"{r['gflop_s']:.3g} GFLOP/s" + (f", {r['gb_per_s']:.3g} GB/s" if "gb_per_s" in r else "")
    elif "gb_per_s" in r:
        rate = f"{r['gb_per_s']:.3g} GB/s"
    else:
        return ["-", "-"]
    shares = [
        f"{_percent(r[key])} of {what}"
        for key, what in (("share_of_csv_parse", "CSV parse"), ("share_of_matmul", "matmul"), ("share_of_copy", "copy"))
        if key in r
    ]
    return [rate, ", ".join(shares) or "-"]


def format_ratio(x: float) -> str:
    """A speed ratio with the digits that matter: 0.37x, 2.4x, 37x (never 0x for a slowdown)."""
    return f"{x:.2g}x" if x < 10 else f"{x:.0f}x"


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown section: a heading and a table, one line per row, then a blank line."""
    lines = [f"## {title}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.0f}"


def _paired_markdown(paired: list[dict[str, Any]]) -> list[str]:
    """The paired comparisons: one row per comparison and thread count, every side's median and
    peak-memory rise, each ratio with its 95% interval."""
    rows = []
    for rec in paired:
        by_role = {c["role"]: c for c in rec["contenders"]}
        ratio = {r["role"]: r for r in rec["ratios"]}

        def side(role: str) -> str:
            c = by_role.get(role)
            return "-" if c is None else f"{c['label']}: {_ms(c['median_s'])}"

        def times(role: str) -> str:
            r = ratio.get(role)
            if r is None:
                return "-"
            low, high = r["ci95"]
            return f"{format_ratio(r['median'])} ({format_ratio(low)}-{format_ratio(high)})"

        memory = " / ".join(_mb(by_role[r]["peak_rss_rise_bytes"]) if r in by_role else "-" for r in ROLES)
        rows.append(
            [
                rec["comparison"],
                rec["threads"],
                side("notebook"),
                side("cpu baseline"),
                side("ours"),
                times("notebook"),
                times("cpu baseline"),
                memory,
            ]  # fmt: skip
        )
    lines = _table(
        "Paired comparisons (CPU; interleaved, ratios within each repeat)",
        [
            "comparison",
            "threads",
            "notebook way",
            "competent CPU",
            "ours",
            "notebook / ours (95% CI)",
            "competent / ours (95% CI)",
            "peak MB (nb / cpu / ours)",
        ],  # fmt: skip
        rows,
    )
    return [
        *lines,
        "Every repeat runs each side once in a rotated order; a ratio above 1 means ours is faster. "
        "Outputs checked: identical rows for the same algorithm, the truth for our default detector. "
        "Peak MB: rise of the resident high-water mark during one call.",
        "",
    ]


def markdown(result: dict[str, Any]) -> str:
    """A Markdown summary of a result dict."""
    m = result["machine"]
    lines = [
        f"# devicepipe bench, {result['date']}",
        "",
        f"Machine: {m['cpu']['model']}, {m['cpu']['logical_cores']} cores, {result['threads']} torch threads; "
        f"GPUs: {', '.join(g['name'] for g in m['gpus']) or 'none'}; PyTorch {m['torch']['version']}"
        f"{', huge pages for CPU tensors' if result.get('huge_pages') else ''}. "
        f"Input: {result['n_samples']:,} samples at 250 Hz; median of {result['repeats']} after warm-up "
        f"(min-max in brackets).",
        "",
    ]
    if result.get("stages"):
        lines += _table(
            "Stages",
            ["stage", "device", "median", "min-max", "M samples/s", "achieved", "share of the limit", "matches CPU"],
            [
                [
                    r["stage"],
                    r["device"],
                    _ms(r["median_s"]),
                    f"{_ms(r['min_s'])}-{_ms(r['max_s'])}",
                    f"{r['samples_per_s'] / 1e6:.1f}",
                    *achieved_cells(r),
                    "-" if r["matches_cpu"] is None else r["matches_cpu"],
                ]
                for r in result["stages"]
            ],
        )
        if result.get("limits"):
            lines += [
                "Limits measured in the same run: "
                + "; ".join(
                    f"{dev}: memory copy {lim['copy_gb_per_s']:.3g} GB/s (read + written), "
                    f"{lim['matmul_n']}x{lim['matmul_n']} matmul {lim['matmul_gflop_s']:.3g} GFLOP/s"
                    + (
                        f", PyArrow CSV parse {lim['csv_parse_mb_per_s']:.3g} MB/s"
                        if "csv_parse_mb_per_s" in lim
                        else ""
                    )
                    for dev, lim in result["limits"].items()
                )
                + ". Achieved rates count the least work a stage must do: the bytes it must read and write, "
                "the filter's direct-form multiply-adds (2 per tap per sample), the model's FLOPs (PyTorch's counter).",
                "",
            ]
    if result.get("ratios"):
        lines += _table(
            "The notebooks' way against ours (CPU, same run, not interleaved: see the paired table)",
            ["stage", "notebook way", "notebook", "ours", "ours faster by"],
            [
                [
                    r["stage"],
                    r["notebook"],
                    _ms(r["notebook_s"]),
                    _ms(r["ours_s"]),
                    format_ratio(r["speedup"]),
                ]
                for r in result["ratios"]
            ],
        )
    if result.get("paired"):
        lines += _paired_markdown(result["paired"])
    sweep = [r for r in result.get("detection_sweep", []) if "skipped" not in r]
    if sweep:

        def pair(r: dict[str, Any]) -> list[Any]:
            sides = {c["label"]: c for c in r["contenders"]}
            low, high = r["ratios"][0]["ci95"]
            ratio = r["ratios"][0]["median"]
            return [f"{r['n_samples']:,}", _ms(sides["sleepecg"]["median_s"]), _ms(sides["ecg_peaks"]["median_s"]),
                    f"{format_ratio(ratio)} ({format_ratio(low)}-{format_ratio(high)})"]  # fmt: skip

        lines += _table(
            "Detection against sleepecg by input size (paired, 1 thread each)",
            ["samples", "sleepecg", "ours", "sleepecg / ours (95% CI)"],
            [pair(r) for r in sweep],
        )
    if result.get("peers"):
        lines += _table(
            "Peers (beat detection, CPU)",
            ["peer", "median", "M samples/s", "F1 vs truth"],
            [
                [r["peer"], f"skipped: {r['skipped']}", "", ""]
                if "skipped" in r
                else [
                    r["peer"],
                    _ms(r["median_s"]),
                    f"{r['samples_per_s'] / 1e6:.1f}",
                    f"{r['f1_vs_truth']:.4f}",
                ]
                for r in result["peers"]
            ],
        )
    if result.get("handoff"):
        h = result["handoff"]
        lines += [
            "## Host round trip vs zero-copy handoff",
            "",
            f"{h['source']} column of {h['elements']:,} float32 on {h['device']}: host round trip "
            f"{_ms(h['naive_host_round_trip']['median_s'])}, handoff {_ms(h['zero_copy_handoff']['median_s'])} "
            f"({format_ratio(h['speedup'])}; shares memory: {h['handoff_shares_memory']}).",
            "",
        ]
    micro = result.get("micro")
    if micro:
        rows = []
        for r in micro["matmul"]:
            peak = "" if r["share_of_peak"] is None else f", {100 * r['share_of_peak']:.0f} % of peak"
            rows.append([f"matmul {r['n']}x{r['n']}", r["device"], f"{r['gflops']:.1f} GFLOP/s{peak}"])
        for r in micro["create"]:
            rows.append(
                [
                    f"create {r['elements']:,} on device vs host + copy",
                    r["device"],
                    f"{_ms(r['on_device']['median_s'])} vs {_ms(r['host_then_copy']['median_s'])}",
                ]
            )
        for r in micro["cnn_step"]:
            rows.append(
                [
                    f"CIFAR CNN step, batch {r['batch']}",
                    r["device"],
                    f"{_ms(r['median_s'])} ({r['images_per_s']:.0f} images/s)",
                ]
            )
        for r in micro["xor"]:
            rows.append([f"XOR classifier, {r['steps']} steps", r["device"], _ms(r["median_s"])])
        for r in micro["ensemble"]:
            rows.append(
                [
                    "10 MLPs fwd+bwd: loop vs vmap",
                    r["device"],
                    f"{_ms(r['loop']['median_s'])} vs {_ms(r['vmap']['median_s'])} ({r['vmap_speedup']:.2f}x)",
                ]
            )
        for r in micro["batching"]:
            rows.append(
                [
                    f"epoch of {r['rows']:,} rows: DataLoader vs on-device",
                    r["device"],
                    f"{_ms(r['dataloader']['median_s'])} vs {_ms(r['on_device']['median_s'])}"
                    f" ({format_ratio(r['speedup'])})",
                ]
            )
        best: dict[tuple[str, str], float] = {}
        for r in micro["bandwidth"]:
            best[(r["device"], r["kind"])] = max(best.get((r["device"], r["kind"]), 0), r["gb_per_s"])
        rows += [[f"best {k} bandwidth", d, f"{v:.1f} GB/s"] for (d, k), v in best.items()]
        lines += _table("Micro-benchmarks", ["benchmark", "device", "result"], rows)
    if result.get("ddp"):
        lines += _table(
            "Training on several processes (DDP, torchrun)",
            [
                "device",
                "processes",
                "threads each",
                "beats",
                "s per epoch",
                "vs 1 process",
                "weights: largest difference from 1 process",
            ],
            [
                [
                    r["device"],
                    r["processes"],
                    r["threads_per_process"],
                    f"{r['beats']:,}",
                    f"{r['epoch_seconds_median']:.3g}",
                    format_ratio(r["speedup_vs_one_process"]),
                    f"{r['max_weight_difference']:.1e}",
                ]  # fmt: skip
                for r in result["ddp"]
            ],
        )
    cross = result.get("crossover")
    if cross:
        lines += ["## Crossover (GPU faster from this size on, transfers included)", ""]
        for key, size in cross["crossover"].items():
            lines.append(
                f"- {key}: {'not measured: no second device' if size is None and len(result['devices']) < 2 else size}"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


ROLES = ("notebook", "cpu baseline", "ours")


def _ratio_axis(ax: Any) -> None:
    """A log ratio axis that starts well below the smallest bar and 1x, so a bar under 1x
    (a loss) reads as one, with room above the largest for its label."""
    heights = [p.get_height() for p in ax.patches if p.get_height() > 0]
    tops = [p.get_height() for p in ax.patches] + [1.0]
    if heights:
        ax.set_ylim(min(min(heights), 1.0) / 2, max(tops) * 3)


def _paired_chart(paired: list[dict[str, Any]]) -> Figure:
    """Ratios of the paired comparisons (theirs / ours) with their 95% intervals, per thread count."""
    fig = new_figure(figsize=(10, 4.8))
    ax = fig.add_subplot()
    labels, values, low, high, colors = [], [], [], [], []
    for rec in paired:
        for r in rec["ratios"]:
            labels.append(f"{rec['comparison']}\nvs {r['versus']}, {rec['threads']}t")
            values.append(r["median"])
            low.append(r["median"] - r["ci95"][0])
            high.append(r["ci95"][1] - r["median"])
            colors.append("tab:blue" if r["role"] == "notebook" else "tab:orange")
    bars = ax.bar(range(len(values)), values, color=colors, yerr=[low, high], capsize=3, ecolor="0.3")
    ax.bar_label(bars, labels=[format_ratio(v) for v in values], fontsize=7, padding=2)
    ax.set_xticks(range(len(values)), labels, fontsize=6, rotation=60, ha="right")
    ax.axhline(1, color="k", lw=0.8)
    ax.set_yscale("log")
    _ratio_axis(ax)
    ax.set_ylabel("their time / ours (above 1: ours faster)")
    ax.set_title("Paired comparisons on the CPU: the notebook way (blue) and a competent CPU way (orange) against ours")
    fig.tight_layout()
    return fig


def charts(result: dict[str, Any]) -> dict[str, Figure]:
    """PNG-ready figures: speedups per stage, bandwidth against size, crossover curves."""
    figs: dict[str, Figure] = {}
    stages = result.get("stages", [])
    devices = result["devices"]
    fig = new_figure(figsize=(9, 4.5))
    ax = fig.add_subplot()
    if len(devices) > 1 and stages:
        cpu = {r["stage"]: r["median_s"] for r in stages if r["device"] == "cpu"}
        other = [r for r in stages if r["device"] != "cpu" and r["stage"] in cpu]
        names = [r["stage"] for r in other]
        gains = [cpu[r["stage"]] / r["median_s"] for r in other]
        bars = ax.bar(names, gains, color=["tab:green" if g >= 1 else "tab:red" for g in gains])
        ax.bar_label(bars, labels=[format_ratio(g) for g in gains], fontsize=8, padding=2)
        ax.set_ylabel(f"speedup of {other[0]['device'] if other else 'GPU'} over CPU (x)")
        ax.set_title("GPU speedup per stage (same input, synchronised medians)")
    elif result.get("ratios"):
        names = [r["stage"] for r in result["ratios"]]
        differ = [name in DIFFERENT_WORK for name in names]
        bars = ax.bar(
            names,
            [r["speedup"] for r in result["ratios"]],
            color=["tab:orange" if d else "tab:blue" for d in differ],
            hatch=None,
        )
        for bar, d in zip(bars, differ, strict=True):
            bar.set_hatch("//" if d else "")
        ax.bar_label(bars, labels=[f"{r['speedup']:.2g}x" for r in result["ratios"]], fontsize=8, padding=2)
        ax.set_ylabel("notebook way / ours (x; above 1: ours faster)")
        ax.set_title("Ours against the notebooks' way, per stage, on the CPU (same run)")
        notes = [f"{name}: {DIFFERENT_WORK[name]}" for name, d in zip(names, differ, strict=True) if d]
        if notes:
            fig.text(
                0.01,
                -0.02,
                "Hatched: the two sides do different work. " + "; ".join(notes) + ".",
                fontsize=8,
                va="top",
                wrap=True,
            )
    ax.axhline(1, color="k", lw=0.8, label="1x: as fast")
    if ax.patches:
        ax.legend(loc="upper right", fontsize=8)
    ax.set_yscale("log")
    _ratio_axis(ax)
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    if ax.patches:  # a run without stages (say --only ddp) has no speed-ups to draw
        figs["speedup.png"] = fig
    if result.get("paired"):
        figs["paired.png"] = _paired_chart(result["paired"])
    micro = result.get("micro")
    if micro and micro["bandwidth"]:
        fig = new_figure(figsize=(8, 4.5))
        ax = fig.add_subplot()
        for key in sorted({(r["device"], r["kind"]) for r in micro["bandwidth"]}):
            pts = [r for r in micro["bandwidth"] if (r["device"], r["kind"]) == key]
            ax.plot([p["bytes"] for p in pts], [p["gb_per_s"] for p in pts], "o-", label=f"{key[1]} ({key[0]})")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("transfer size (bytes)")
        ax.set_ylabel("bandwidth (GB/s)")
        ax.set_title("Bandwidth against transfer size (small copies are latency-bound)")
        ax.legend()
        ax.grid(alpha=0.3, which="both")
        figs["bandwidth.png"] = fig
    cross = result.get("crossover")
    if cross:
        fig = new_figure(figsize=(11, 4.5))
        axes = fig.subplots(1, 2)
        for ax, key, unit in ((axes[0], "detect", "samples"), (axes[1], "train_epoch", "beats")):
            for dev in devices:
                pts = [p for p in cross["curves"][key] if p["device"] == dev]
                ax.plot([p["size"] for p in pts], [p["median_s"] for p in pts], "o-", label=dev)
            size = cross["crossover"].get(key)
            if size:
                ax.axvline(size, color="k", ls="--", lw=1, label=f"crossover {size:,}")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(f"input size ({unit})")
            ax.set_ylabel("seconds (transfers included)")
            title = {"detect": "Beat detection", "train_epoch": "One VAE training epoch"}[key]
            if len(devices) < 2:
                title += "\n(one device measured: no crossover to find)"
            ax.set_title(title)
            ax.legend()
            ax.grid(alpha=0.3, which="both")
        fig.tight_layout()
        figs["crossover.png"] = fig
    return figs


def write_report(result: dict[str, Any], out: str | Path) -> dict[str, Path]:
    """Write ``bench.json``, ``bench.md``, the charts and ``report.html`` into ``out``."""

    out = Path(out)
    files = {"bench.json": write_json(result, out / "bench.json")}
    with atomic_path(out / "bench.md") as tmp:
        tmp.write_text(markdown(result), encoding="utf-8")
    files["bench.md"] = out / "bench.md"
    for name, fig in charts(result).items():
        files[name] = save_figure(fig, out / name)
    # the Markdown summary's tables as HTML (raw HTML in it is not passed through), with the charts
    tables = Markup(MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown(result)))
    page = {"subtitle": f"{result['machine']['cpu']['model']}, {result['date']}", "warnings": [], "seconds": {}}
    files[REPORT_NAME] = write_page(out, "bench", page, files, extra_html=tables)
    return files


def _flatten(result: dict[str, Any]) -> dict[str, float]:
    """Comparable medians keyed by section/name/device."""
    out: dict[str, float] = {}
    for r in result.get("stages", []):
        out[f"stage {r['stage']} on {r['device']}"] = r["median_s"]
    for r in result.get("baselines", []):
        if "median_s" in r:
            out[f"notebook {r['baseline']}"] = r["median_s"]
    for r in result.get("peers", []):
        if "median_s" in r:
            out[f"peer {r['peer']}"] = r["median_s"]
    for r in result.get("ddp", []):
        out[f"ddp epoch, {r['processes']} x {r['threads_per_process']} threads on {r['device']}"] = r[
            "epoch_seconds_median"
        ]
    for sec, recs in (result.get("micro") or {}).items():
        for r in recs:
            if sec == "matmul":
                out[f"matmul {r['n']} on {r['device']}"] = r["median_s"]
            elif sec == "cnn_step":
                out[f"cnn step on {r['device']}"] = r["median_s"]
            elif sec == "ensemble":
                out[f"ensemble vmap on {r['device']}"] = r["vmap"]["median_s"]
                out[f"ensemble loop on {r['device']}"] = r["loop"]["median_s"]
    return out


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Entries measured in both results: A's and B's medians and the ratio A / B (> 1: B is faster)."""
    fa, fb = _flatten(a), _flatten(b)
    return [{"name": k, "a_s": fa[k], "b_s": fb[k], "ratio": fa[k] / fb[k]} for k in fa if k in fb and fb[k] > 0]


def load_result(path: str | Path) -> dict[str, Any]:

    p = Path(path)
    if not p.exists():
        raise DevicepipeError(f"benchmark result not found: {p}.")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DevicepipeError(f"{p} is not a benchmark JSON file ({exc.msg} at line {exc.lineno}).") from None
    if not isinstance(data, dict) or "devices" not in data:
        raise DevicepipeError(f"{p} is not a devicepipe bench result (no 'devices' entry).")
    return data
