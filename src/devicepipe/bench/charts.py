"""The benchmark results as charts: each section's ratios on a log axis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devicepipe.plots import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure
from devicepipe.bench.tables import DIFFERENT_WORK, format_ratio


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
    for name, chart in (("bandwidth.png", _bandwidth_chart), ("crossover.png", _crossover_chart)):
        drawn = chart(result)
        if drawn is not None:
            figs[name] = drawn
    return figs


def _bandwidth_chart(result: dict[str, Any]) -> Figure | None:
    """Bandwidth against transfer size, one line per device and kind of copy."""
    micro = result.get("micro")
    if not (micro and micro["bandwidth"]):
        return None
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
    return fig


def _crossover_chart(result: dict[str, Any]) -> Figure | None:
    """Detection and a training epoch by input size on each device, with the crossover."""
    devices = result["devices"]
    cross = result.get("crossover")
    if not (cross):
        return None
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
    return fig
