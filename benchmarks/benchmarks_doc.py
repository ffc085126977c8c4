"""Regenerate BENCHMARKS.md's tables from the committed results, and check every figure it quotes.

    python benchmarks/benchmarks_doc.py           # rewrite the generated tables in place
    python benchmarks/benchmarks_doc.py --check   # exit 1 when a table is stale or a figure has no source

A generated table sits between ``<!-- table NAME: PATH -->`` and ``<!-- end table -->``; NAME
picks the renderer below and PATH the committed result it reads (relative to the repository).
Everything else in the file is prose, and each figure in it must be found in the results the
section cites (the ``benchmarks/results/...`` paths named in it): see :func:`unsourced`.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "BENCHMARKS.md"

# ---------------------------------------------------------------------------------------------
# formatting: `devicepipe bench`'s own, so the tables read as its Markdown does

import headline  # noqa: E402
from results_io import table  # noqa: E402

from devicepipe.bench.report import achieved_cells, format_ratio, format_seconds  # noqa: E402

_ms, _ratio, _table = format_seconds, format_ratio, table


# ---------------------------------------------------------------------------------------------
# renderers: NAME -> function(result) -> table lines

STAGE_NAMES = {
    "read_csv": "read CSV",
    "read_parquet": "read Parquet",
    "h2d_pageable": "host to device, pageable",
    "h2d_pinned": "host to device, pinned",
    "scale": "scale (MinMax)",
    "filter": "filter (31-tap Ricker)",
    "peaks": "peak suppression",
    "detect": "beat detection (all of it)",
    "segment": "segmentation",
    "train_epoch": "one VAE training epoch",
    "score": "scoring the beats",
    "pipeline": "CSV to beat matrix",
}


def stages_cpu(result: dict[str, Any]) -> list[str]:
    """Every stage on the CPU: ours (median, min-max), the notebooks' way in the same run, the
    ratio, and the achieved rate against the limit measured in the run."""
    base = {b["versus"]: b for b in result.get("baselines", []) if "median_s" in b}
    rows = []
    for r in result["stages"]:
        if r["device"] != "cpu":
            continue
        b = base.get(r["stage"])
        rows.append(
            [
                STAGE_NAMES.get(r["stage"], r["stage"]),
                f"{_ms(r['median_s'])} ({_ms(r['min_s'])}-{_ms(r['max_s'])})",
                "-" if b is None else f"{b['baseline']} {_ms(b['median_s'])}",
                "-" if b is None else _ratio(b["median_s"] / r["median_s"]),
                *achieved_cells(r),
            ]
        )
    return _table(
        [
            "stage (CPU)",
            "ours, median (min-max)",
            "the notebooks' way, same run",
            "ours faster by",
            "achieved",
            "share of the limit",
        ],  # fmt: skip
        rows,
    )


def limits(result: dict[str, Any]) -> list[str]:
    """The machine's limits measured in the run, one row per device."""
    rows = [
        [
            dev,
            f"{lim['copy_gb_per_s']:.3g} GB/s",
            f"{lim['matmul_gflop_s']:.3g} GFLOP/s (n = {lim['matmul_n']})",
            f"{lim['csv_parse_mb_per_s']:.3g} MB/s" if "csv_parse_mb_per_s" in lim else "-",
        ]
        for dev, lim in result.get("limits", {}).items()
    ]
    return _table(["device", "memory copy (read + written)", "float32 matmul", "PyArrow CSV parse"], rows)


def paired(result: dict[str, Any]) -> list[str]:
    """The paired comparisons: each side's median, the two ratios with 95% intervals, peak memory."""
    rows = []
    for rec in result["paired"]:
        sides = {c["role"]: c for c in rec["contenders"]}
        ratios = {r["role"]: r for r in rec["ratios"]}

        def side(role: str, sides: dict[str, Any] = sides) -> str:
            c = sides.get(role)
            return "-" if c is None else f"{c['label']} {_ms(c['median_s'])}"

        def ratio(role: str, ratios: dict[str, Any] = ratios) -> str:
            r = ratios.get(role)
            return "-" if r is None else f"{_ratio(r['median'])} ({_ratio(r['ci95'][0])}-{_ratio(r['ci95'][1])})"

        mb = " / ".join(
            "-"
            if sides.get(k, {}).get("peak_rss_rise_bytes") is None
            else f"{sides[k]['peak_rss_rise_bytes'] / 2**20:.0f}"
            for k in ("notebook", "cpu baseline", "ours")
        )
        rows.append([rec["comparison"], rec["threads"], side("notebook"), side("cpu baseline"), side("ours"),
                     ratio("notebook"), ratio("cpu baseline"), mb])  # fmt: skip
    return _table(
        [
            "comparison",
            "threads",
            "notebook way",
            "competent CPU way",
            "ours",
            "notebook / ours (95% CI)",
            "competent / ours (95% CI)",
            "peak MB rise (notebook / competent / ours)",
        ],  # fmt: skip
        rows,
    )


def sweep(result: dict[str, Any]) -> list[str]:
    """Detection against sleepecg by input size, paired, one thread each."""
    rows = []
    for r in result["detection_sweep"]:
        if "skipped" in r:
            continue
        sides = {c["label"]: c for c in r["contenders"]}
        q = r["ratios"][0]
        rows.append([f"{r['n_samples']:,}", _ms(sides["sleepecg"]["median_s"]), _ms(sides["ecg_peaks"]["median_s"]),
                     f"{_ratio(q['median'])} ({_ratio(q['ci95'][0])}-{_ratio(q['ci95'][1])})"])  # fmt: skip
    return _table(["samples", "sleepecg", "ours", "sleepecg time / ours (95% CI)"], rows)


def stages_gpu(result: dict[str, Any]) -> list[str]:
    """Every stage on the CPU and the GPU of one machine, and the GPU's gain."""
    cpu = {r["stage"]: r for r in result["stages"] if r["device"] == "cpu"}
    rows = []
    for r in result["stages"]:
        if r["device"] == "cpu":
            continue
        c = cpu.get(r["stage"])
        rows.append(
            [
                STAGE_NAMES.get(r["stage"], r["stage"]),
                "-" if c is None else _ms(c["median_s"]),
                _ms(r["median_s"]),
                "-" if c is None else _ratio(c["median_s"] / r["median_s"]),
                {True: "yes", False: "no", None: "-"}[r.get("matches_cpu")],
            ]
        )
    threads = next(iter(cpu.values()))["threads"] if cpu else "?"
    gpu = result["machine"]["gpus"][0]["name"] if result["machine"].get("gpus") else "GPU"
    return _table(["stage", f"CPU ({threads} threads)", gpu, "GPU faster by", "matches CPU"], rows)


def peers_accuracy(result: dict[str, Any]) -> list[str]:
    """Accuracy on the shared annotated recordings, per set, and each detector's rate over them."""
    names = {"devicepipe": "devicepipe (`ricker`)", "sleepecg": "sleepecg `detect_heartbeats`",
             "wfdb-xqrs": "wfdb `xqrs_detect`", "neurokit2": "NeuroKit2 `ecg_clean` + `ecg_peaks`"}  # fmt: skip
    titles = {"mitdb": "MIT-BIH 100", "cpsc2021": "CPSC 2021 (9)", "cpsc2019": "CPSC 2019 (25)"}
    rows = []
    for name, acc in result["accuracy"].items():
        for group, g in acc["sets"].items():
            pooled, worst = g["pooled"], g["worst"]
            rows.append([names.get(name, name), titles.get(group, group), f"{pooled['f1']:.4f}",
                         f"{pooled['sensitivity']:.4f}", f"{pooled['ppv']:.4f}",
                         f"{pooled['tp']} / {pooled['fp']} / {pooled['fn']}",
                         f"{worst['f1']:.4f} ({worst['record']})" if g["records"] > 1 else "",
                         f"{acc['samples_per_s'] / 1e6:.1f}"])  # fmt: skip
    return _table(
        [
            "detector",
            "records",
            "pooled F1",
            "sensitivity",
            "positive predictivity",
            "TP / FP / FN",
            "worst record's F1",
            "M samples/s over all these recordings",
        ],  # fmt: skip
        rows,
    )


def peers_speed(result: dict[str, Any]) -> list[str]:
    """Detection speed on one long simulated ECG."""
    rows = [
        [
            name,
            f"{r['seconds_median']:.3f}"
            + (f" ({r['seconds_min']:.3f}-{r['seconds_max']:.3f})" if r["repeats"] > 1 else ""),
            r["repeats"],
            f"{r['samples_per_s'] / 1e6:.1f}",
        ]  # fmt: skip
        for name, r in result["speed"].items()
    ]
    return _table(["detector", "seconds, median (min-max)", "timed runs", "M samples/s"], rows)


def datasets_folder(result: dict[str, Any]) -> list[str]:
    """A folder of recordings through each engine: best of the rounds."""
    f = result["folder"]
    if "startup_seconds" not in f:  # results from before the start was measured
        rows = [[how, f"{min(secs):.1f}", f"{f['records_per_s'][how]:.1f}"] for how, secs in f["seconds"].items()]
        return _table(["engine", "seconds (best of the rounds)", "records/s"], rows)
    rows = [
        [
            how,
            f"{statistics.median(secs):.1f} ({min(secs):.1f}-{max(secs):.1f})",
            f"{f['records_per_s'][how]:.1f}",
            f"{statistics.median(f['startup_seconds'][how]):.1f}",
            f"{f['records_per_s_after_start'][how]:.1f}",
        ]
        for how, secs in f["seconds"].items()
    ]
    head = ["engine", "seconds, median (min-max)", "records/s", "start-up seconds", "records/s after the start"]
    return _table(head, rows)


def datasets_batch(result: dict[str, Any]) -> list[str]:
    """1,000 short ECGs: one batched call against sleepecg, in memory and from a folder (medians)."""
    b = result["batch"]
    rows = [[f"in memory: {k}", f"{statistics.median(v):.3f}"] for k, v in b["in_memory_s"].items()]
    rows += [[f"folder: {k}", f"{statistics.median(v):.2f}"] for k, v in b["folder_s"].items()]
    return _table(["way", "seconds (median)"], rows)


def datasets_memory(result: dict[str, Any]) -> list[str]:
    """Long recordings, each in its own process: peak resident memory and seconds per way of reading."""
    runs = [r for r in result["memory"]["runs"] if "peak_rss_bytes" in r]
    hows = list(dict.fromkeys(r["how"] for r in runs))
    rows = []
    for hours in dict.fromkeys(r["hours"] for r in runs):
        cells = {r["how"]: r for r in runs if r["hours"] == hours}
        first = next(iter(cells.values()))
        peaks = (
            f"{cells[h]['peak_rss_bytes'] / 2**20:,.0f} MiB / {cells[h]['seconds']:.1f} s" if h in cells else "—"
            for h in hows
        )
        rows.append([f"{hours:g} h", f"{first['samples']:,}", f"{first['beats']:,}", *peaks])
    return _table(["length", "samples", "beats", *(f"{h}: peak / seconds" for h in hows)], rows)


def datasets_sizes(result: dict[str, Any]) -> list[str]:
    """Detection time against sleepecg by length, one thread each (medians of interleaved repeats)."""
    rows = [
        [f"{r['samples']:,}", r["repeats"], f"{r['ours_ms']:.3g}", f"{r['sleepecg_ms']:.3g}", f"{r['speed_ratio']:.2f}"]
        for r in result["sizes"]["rows"]
    ]
    return _table(["samples", "repeats", "ours (ms)", "sleepecg (ms)", "sleepecg time / ours"], rows)


def one_class(result: dict[str, Any]) -> list[str]:
    """Per task: the best simple baseline, and ours with each scorer (mean ROC AUC over the seeds)."""
    rows = []
    for t in result["tasks"]:
        models = t["models"]
        base = max(("PCA error", "IsolationForest", "1-NN", "5-NN"), key=lambda m: models[m]["auc_mean"])
        ours = [m for m in models if m.startswith("ours")]
        rows.append([t["task"], t["n_train"], f"{models[base]['auc_mean']:.3f} ({base})",
                     *(f"{models[m]['auc_mean']:.3f}" for m in ours)])  # fmt: skip
    ours = [m for m in result["tasks"][0]["models"] if m.startswith("ours")]
    return _table(["task", "training rows", "best of PCA / IForest / 1-NN / 5-NN", *ours], rows)


def ddp(result: dict[str, Any]) -> list[str]:
    """Training in one process and in several (torchrun), per device."""
    rows = [
        [
            r["device"],
            r["processes"],
            r["threads_per_process"],
            f"{r['beats']:,}",
            f"{r['epoch_seconds_median']:.3g}",
            f"{r['speedup_vs_one_process']:.2f}x",
            f"{r['max_weight_difference']:.1e}",
        ]  # fmt: skip
        for r in result["ddp"]
    ]
    return _table(["device", "processes", "threads each", "beats", "s per epoch", "vs 1 process, 1 thread",
                   "weights: largest difference from 1 process"], rows)  # fmt: skip


def include(path: Path, index: int = 1) -> list[str]:
    """The ``index``-th table of a Markdown file written by a benchmark script from its JSON."""
    tables, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables[index - 1]


RENDERERS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "stages_cpu": stages_cpu,
    "limits": limits,
    "paired": paired,
    "sweep": sweep,
    "stages_gpu": stages_gpu,
    "peers_accuracy": peers_accuracy,
    "peers_speed": peers_speed,
    "datasets_folder": datasets_folder,
    "datasets_batch": datasets_batch,
    "datasets_memory": datasets_memory,
    "datasets_sizes": datasets_sizes,
    "one_class": one_class,
    "ddp": ddp,
}

MARK = re.compile(r"^<!-- table (?P<name>[\w-]+): (?P<path>\S+?)(?:#(?P<index>\d+))? -->$")
END = "<!-- end table -->"


TOC = "<!-- contents -->"
TOC_END = "<!-- end contents -->"


def anchor(heading: str) -> str:
    """A heading's link target as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def contents(text: str) -> list[str]:
    """A list of the page's sections (its ``##`` headings), each a link to it."""
    titles = [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]
    return [f"- [{title}](#{anchor(title)})" for title in titles]


def render(text: str, changed: Callable[[str, tuple[str, ...]], bool | None] = headline.changed_since) -> str:
    """``text`` with every generated table rebuilt from its result file, and its contents
    (``changed``: whether a claim's code changed since a commit, :func:`headline.changed_since`)."""
    out: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        out.append(line)
        if line == TOC:
            for skipped in lines:
                if skipped == TOC_END:
                    break
            else:
                raise ValueError(f"the contents have no {TOC_END!r}")
            out += contents(text)
            out.append(TOC_END)
            continue
        m = MARK.match(line)
        if not m:
            continue
        old = []
        for skipped in lines:
            if skipped == END:
                break
            old.append(skipped)
        else:
            raise ValueError(f"table {m['name']!r} has no {END!r}")
        path = ROOT / m["path"]
        if m["name"] == "include":
            out += include(path, int(m["index"] or 1))
        elif m["name"] == "headline":
            out += _table(headline.HEADER, headline.rows(changed, previous=old))
        else:
            out += RENDERERS[m["name"]](json.loads(path.read_text(encoding="utf-8")))
        out.append(END)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# every quoted figure must be in the results its section cites

#: A figure: 1,234.5 or 0.5 or 3e-4, standing alone or with an ``x`` (a ratio) after it.
NUMBER = re.compile(
    r"(?:(?<![\w.\-/+])|(?<=\s[-+])|(?<=\d-))(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e-?\d+)?(?!\.?\d)(?!x\w)(?![a-wyzA-Z_])"
)
RESULT_PATH = re.compile(r"benchmarks/results/[\w./-]*(?:\{[\w,.]+\})?[\w./-]*")
#: Not measurements: dates and times, versions, sizes of the setup, names that contain numbers.
NOT_FIGURES = [
    r"\d{4}-\d{2}-\d{2}",  # dates
    r"\b\d{1,2}:\d{2}(?::\d{2})?\b",  # times of day
    r"\b\d+\.\d+\.\d+[^\s`]*",  # versions (a code span's closing backtick left to pair)
    r"`[^`]*`",  # code: commands, options, names (a bare figure in backticks was unwrapped before)
    r"<!--.*?-->",
    r"MIT-BIH \d+|CPSC \d{4}|\b\d+_\d+\b|ECG\d+|H100|HBM3|EC57|UTC|\b\d+-NN\b|k ?= ?\d+|\bn = \d+",
    r"\(\d\)",  # task labels: CBF (1)
    r"[≥≤] ?[\d.,]+",  # targets
    r"float\d+|int\d+|bf16|\d+x\d+ matmul|[\d,]+-(?:bit|tap|core|sample|minute|second|member)|\d+ Hz",
    r"reference beat within \d+ ms",  # the scoring convention
    r"seeds? \d(?:, \d)*(?: and \d)?",
    r"\bformats? \d+(?![\d.])(?:(?:, | or | and )\d+(?![\d.]))*",  # WFDB's storage formats: names, not figures
    r"\b95 ?% (?:interval|CI|confidence)",  # the confidence level: a setting
]


def _expand(path: str) -> list[str]:
    m = re.search(r"\{([\w,.]+)\}", path)
    if not m:
        return [path]
    return [path[: m.start()] + part + path[m.end() :] for part in m[1].split(",")]


def _values(path: Path) -> Iterator[tuple[str, float]]:
    """Every number in a result file with where it sits: ``(keys, value)`` for JSON (``keys`` the
    lower-cased path of dict keys, numbers inside strings included), ``("", value)`` for text."""
    if path.suffix == ".png":
        return
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".json":
        yield from (("", float(t.replace(",", ""))) for t in NUMBER.findall(text))
        return

    def walk(x: Any, keys: str) -> Iterator[tuple[str, float]]:
        if isinstance(x, bool):
            return
        if isinstance(x, (int, float)):
            yield keys, float(x)
        elif isinstance(x, str):
            yield from ((keys, float(t.replace(",", ""))) for t in NUMBER.findall(x))
        elif isinstance(x, dict):
            for k, v in x.items():
                yield from walk(k, keys)
                yield from walk(v, f"{keys}.{str(k).lower()}")
        elif isinstance(x, list):
            for v in x:
                yield from walk(v, keys)

    yield from walk(json.loads(text), "")


_TIME = ("_s", "_ms", "second", "time", "wall", "median", "min", "max")
_RATIO = ("ratio", "speedup", "vs", "ci95")
#: The unit written after a figure: the factors from a result's value to it, and words one of
#: which the value's keys must contain (any value of a text file qualifies).
UNITS = [
    (re.compile(r"x\b"), (1.0,), _RATIO),
    (
        re.compile(r" ?%"),
        (100.0, 1.0),
        (*_RATIO, "share", "f1", "auc", "sensitivity", "specificity", "ppv", "pct", "throughput"),
    ),
    (re.compile(r" ms\b"), (1e3, 1.0), _TIME),  # from seconds, or from milliseconds
    (re.compile(r" us\b"), (1e6, 1.0), (*_TIME, "_us")),  # from seconds, or from microseconds
    (re.compile(r" s\b"), (1.0,), _TIME),
    (re.compile(r" Mi?B\b(?!/s)"), (2.0**-20, 1e-6, 1.0), ("bytes", "rss", "mb")),
    (re.compile(r" GB/s"), (1.0, 1e-9), ("gb", "bandwidth", "bytes")),
    (re.compile(r" MB/s"), (1.0, 1e-6), ("mb", "bytes")),
    (re.compile(r" [GT]FLOP/s"), (1.0, 1e-3, 1e-9, 1e-12), ("flop",)),
    (re.compile(r" GB\b(?!/s)"), (1e-9, 2.0**-30), ("bytes",)),
    (re.compile(r" [MG]\b"), (1e-6, 1e-9), ("samples",)),  # M samples, G samples/s
]
#: A figure with no unit after it: a count, or a value as recorded.
NO_UNIT = ((1.0,), ())
#: The first figure of a range or pair ("21.7 to 120 ms", "0.95-2.5x", "297 and 529 ms") takes
#: the unit after the second.
RANGE = re.compile(r"(?:-| to | and )[\d.,]*\d")


def _unit(after: str) -> tuple[tuple[float, ...], tuple[str, ...]]:
    m = RANGE.match(after)
    if m:
        after = after[m.end() :]
    for pattern, scales, words in UNITS:
        if pattern.match(after):
            return scales, words
    return NO_UNIT


def _quoted_matches(
    token: str, values: set[tuple[str, float]], unit: tuple[tuple[float, ...], tuple[str, ...]] = NO_UNIT
) -> bool:
    """Whether a value whose keys fit the unit, times one of its factors, rounds to ``token`` at
    the digits it shows."""
    q = float(token.replace(",", ""))
    decimals = len(token.split(".")[1]) if "." in token else 0
    half = 0.5 * 10.0**-decimals * (1 + 1e-9)
    if not decimals and q >= 1000:  # a large whole number may be given to 3 significant figures
        half = max(half, 0.5 * 10 ** (int(math.log10(q)) - 2))
    scales, words = unit
    return any(
        abs(v * s - q) <= half
        for keys, v in values
        if not words or not keys or any(w in keys for w in words)
        for s in scales
    )


def sections(text: str) -> Iterator[tuple[str, str]]:
    """(heading, body) of each ``##`` section."""
    parts = re.split(r"^## ", text, flags=re.M)
    for part in parts[1:]:
        heading, _, body = part.partition("\n")
        yield heading, body


def unsourced(text: str, root: Path = ROOT) -> list[tuple[str, str]]:
    """(section, figure) for each figure quoted in ``text`` that none of the section's cited
    result files holds (at the precision quoted, in the unit written after it: :data:`UNITS`). Cited paths are
    relative to ``root``; a cited folder stands for the JSON files in it. Generated tables are
    left out (rendering them again checks them), and so is code in backticks (but not a bare figure
    in backticks, which is a figure all the same). Numbers after ``≥``
    or ``≤`` are targets, not measurements, and whole numbers up to 10 are counts of the set-up
    (cores, repeats, threads)."""
    missing = []
    for heading, body in sections(text):
        cited = {p for raw in RESULT_PATH.findall(body) for p in _expand(raw.rstrip("."))}
        values: set[tuple[str, float]] = set()
        for p in sorted(cited):
            path = root / p
            if path.is_dir():
                for f in sorted(path.glob("*.json")):
                    values.update(_values(f))
            elif path.exists():
                values.update(_values(path))
        prose = re.sub(r"^<!-- table .*?^<!-- end table -->$", " ", body, flags=re.M | re.S)  # checked by rendering
        prose = re.sub(r"`([\d,.]+)`", r"\1", prose)  # a bare figure in backticks is a figure all the same
        for pattern in NOT_FIGURES:
            prose = re.sub(pattern, " ", prose)
        for m in NUMBER.finditer(prose):
            token = m.group()
            if float(token.replace(",", "")) <= 10 and "." not in token:  # counts of the set-up: 2 cores, 5 repeats
                continue
            if not _quoted_matches(token, values, _unit(prose[m.end() : m.end() + 24])):
                missing.append((heading, token))
    return missing


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if anything is out of date")
    args = p.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    fresh = render(text)
    stale = fresh != text
    missing = unsourced(fresh)
    for heading, token in missing:
        print(f"no source for {token!r} in section {heading!r}", file=sys.stderr)
    if args.check:
        if stale:
            print(
                "BENCHMARKS.md: a generated table is out of date; run python benchmarks/benchmarks_doc.py",
                file=sys.stderr,
            )
        return int(stale or bool(missing))
    if stale:
        DOC.write_text(fresh, encoding="utf-8")
    return int(bool(missing))


if __name__ == "__main__":
    raise SystemExit(main())
