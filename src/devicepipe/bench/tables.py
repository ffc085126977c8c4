"""The benchmark results as Markdown: ratios, cells and every section's table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


DIFFERENT_WORK = {
    "peaks": "ours keeps maxima over a 99-sample neighbourhood, the notebook's kernel over 180",
    "pipeline": "ours detects beats with the Ricker method, the notebook with its curvature suppression",
}


def ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
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
    for section in MARKDOWN_SECTIONS:
        lines += section(result)
    return "\n".join(lines) + "\n"


def _stages_md(result: dict[str, Any]) -> list[str]:
    """The stages table and the limits measured with it."""
    lines: list[str] = []
    if not result.get("stages"):
        return lines
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
                + (f", PyArrow CSV parse {lim['csv_parse_mb_per_s']:.3g} MB/s" if "csv_parse_mb_per_s" in lim else "")
                for dev, lim in result["limits"].items()
            )
            + ". Achieved rates count the least work a stage must do: the bytes it must read and write, "
            "the filter's direct-form multiply-adds (2 per tap per sample), the model's FLOPs (PyTorch's counter).",
            "",
        ]
    return lines


def _ratios_md(result: dict[str, Any]) -> list[str]:
    """The notebooks' way against ours."""
    lines: list[str] = []
    if not result.get("ratios"):
        return lines
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
    return lines


def _paired_md(result: dict[str, Any]) -> list[str]:
    """The paired (alternated) comparisons."""
    return _paired_markdown(result["paired"]) if result.get("paired") else []


def _sweep_md(result: dict[str, Any]) -> list[str]:
    """Detection against sleepecg by input size."""
    lines: list[str] = []
    sweep = [r for r in result.get("detection_sweep", []) if "skipped" not in r]
    if not sweep:
        return lines

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
    return lines


def _peers_md(result: dict[str, Any]) -> list[str]:
    """Beat detection of the peer libraries."""
    lines: list[str] = []
    if not result.get("peers"):
        return lines
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
    return lines


def _handoff_md(result: dict[str, Any]) -> list[str]:
    """Host round trip against the zero-copy handoff."""
    lines: list[str] = []
    if not result.get("handoff"):
        return lines
    h = result["handoff"]
    lines += [
        "## Host round trip vs zero-copy handoff",
        "",
        f"{h['source']} column of {h['elements']:,} float32 on {h['device']}: host round trip "
        f"{_ms(h['naive_host_round_trip']['median_s'])}, handoff {_ms(h['zero_copy_handoff']['median_s'])} "
        f"({format_ratio(h['speedup'])}; shares memory: {h['handoff_shares_memory']}).",
        "",
    ]
    return lines


def _micro_md(result: dict[str, Any]) -> list[str]:
    """The tutorials' micro-benchmarks."""
    lines: list[str] = []
    micro = result.get("micro")
    if not micro:
        return lines
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
    return lines


def _ddp_md(result: dict[str, Any]) -> list[str]:
    """Training on several processes."""
    lines: list[str] = []
    if not result.get("ddp"):
        return lines
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
    return lines


def _crossover_md(result: dict[str, Any]) -> list[str]:
    """The sizes from which the GPU is faster."""
    lines: list[str] = []
    cross = result.get("crossover")
    if not cross:
        return lines
    lines += ["## Crossover (GPU faster from this size on, transfers included)", ""]
    for key, size in cross["crossover"].items():
        lines.append(
            f"- {key}: {'not measured: no second device' if size is None and len(result['devices']) < 2 else size}"
        )
    lines.append("")
    return lines


#: The sections of :func:`markdown`, in order: each takes the result dict and gives its lines
#: (none when the run did not measure it).
MARKDOWN_SECTIONS = (
    _stages_md,
    _ratios_md,
    _paired_md,
    _sweep_md,
    _peers_md,
    _handoff_md,
    _micro_md,
    _ddp_md,
    _crossover_md,
)


ROLES = ("notebook", "cpu baseline", "ours")
