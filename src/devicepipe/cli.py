"""The ``devicepipe`` command: parse arguments, call the library, print.

This is the only module that prints. User mistakes (a bad path, an unknown column, a device
that is not there, a malformed option) end as one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import os
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from devicepipe.errors import DevicepipeError

# PyTorch backs CPU buffers of 2 MB and more with transparent huge pages when this is set
# (read once, at its first allocation, so before torch is used): a new full-length tensor
# then costs one page fault per 2 MB instead of per 4 KB, as NumPy's allocator already does.
# An explicit THP_MEM_ALLOC_ENABLE=0 in the environment turns it off.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")


class _OneLineErrors(TyperGroup):
    """Turn usage errors and DevicepipeErrors into one line on stderr and exit status 2."""

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            rv = super().main(
                args=args,
                prog_name=prog_name or "devicepipe",
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
        except DevicepipeError as exc:
            _fail(str(exc))
        except Exception as exc:
            # click's UsageError/BadParameter (vendored by typer, so matched by shape)
            if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
                ctx = getattr(exc, "ctx", None)
                where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
                message = " ".join(exc.format_message().split())
                _fail(f"{message}{where}", int(exc.exit_code))
            if type(exc).__name__ == "Abort":
                sys.exit(1)
            raise
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"devicepipe: error: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


app = typer.Typer(
    cls=_OneLineErrors,
    help="Device-resident pipelines for long recordings (ECG, load series), on a GPU when there is one.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
simulate_app = typer.Typer(
    cls=_OneLineErrors,
    help="Write synthetic recordings with ground truth (for trying things without data).",
    no_args_is_help=True,
)
app.add_typer(simulate_app, name="simulate")


def _console() -> Console:
    return Console(highlight=False)


class NanPolicy(StrEnum):
    error = "error"
    drop = "drop"
    interpolate = "interpolate"


class DuplicatePolicy(StrEnum):
    keep = "keep"
    first = "first"
    mean = "mean"
    error = "error"


DeviceOpt = Annotated[str, typer.Option("--device", "-d", help="auto, cpu, cuda or cuda:N.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]


# ----------------------------------------------------------------------------- info


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


@app.command()
def info(as_json: JsonOpt = False) -> None:
    """Show Python, PyTorch and its CUDA build, the GPUs, the CPU and which optional libraries work."""
    from devicepipe.device import device_report

    report = device_report()
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    con = _console()
    t = report["torch"]
    con.print(f"[bold]devicepipe[/bold] on Python {report['python']} ({report['platform']})")
    con.print(f"PyTorch {t['version']}, CUDA build: {t['cuda_build'] or 'none'}, cuDNN: {t['cudnn'] or 'none'}")
    cpu = report["cpu"]
    con.print(
        f"CPU: {cpu['model']}, {cpu['logical_cores']} logical core(s), {cpu['usable_cores']} usable, "
        f"torch uses {cpu['torch_threads']} thread(s)"
    )
    if report["gpus"]:
        table = Table(title="GPUs")
        for col in ("index", "name", "compute capability", "memory (free / total)", "multiprocessors"):
            table.add_column(col)
        for g in report["gpus"]:
            table.add_row(
                str(g["index"]),
                g["name"],
                g["compute_capability"],
                f"{_gib(g['free_memory_bytes'])} / {_gib(g['total_memory_bytes'])}",
                str(g["multiprocessors"]),
            )
        con.print(table)
    else:
        con.print(f"GPUs: none ({report['cuda']['reason']})")
    table = Table(title="Optional libraries")
    for col in ("library", "version", "status", "detail"):
        table.add_column(col)
    for lib in report["libraries"]:
        style = "green" if lib["works"] else "dim"
        table.add_row(lib["name"], lib["version"] or "-", f"[{style}]{lib['status']}[/{style}]", lib["detail"])
    con.print(table)


# ----------------------------------------------------------------------------- read


def _recording_summary(rec: Any) -> dict[str, Any]:
    import torch

    x = rec.samples if rec.samples.ndim == 2 else rec.samples.unsqueeze(0)
    x64 = x.to(torch.float64)
    stats = []
    for i, name in enumerate(rec.channels):
        row = x64[i]
        stats.append(
            {
                "channel": name,
                "unit": rec.units[i],
                "min": float(row.min()),
                "max": float(row.max()),
                "mean": float(row.mean()),
                "std": float(row.std()) if row.numel() > 1 else 0.0,
            }
        )
    return {
        "source": rec.source,
        "device": str(rec.device),
        "dtype": str(rec.samples.dtype).replace("torch.", ""),
        "shape": list(rec.samples.shape),
        "n_samples": rec.n_samples,
        "sampling_rate_hz": rec.sampling_rate,
        "duration_s": rec.duration_s,
        "n_nan": rec.n_nan,
        "nan_policy": rec.nan_policy,
        "channels": stats,
        "time": None if rec.time_report is None else rec.time_report.to_dict(),
    }


def _print_summary(summary: dict[str, Any], con: Console) -> None:
    rate = summary["sampling_rate_hz"]
    dur = summary["duration_s"]
    con.print(
        f"[bold]{summary['source']}[/bold]: {summary['n_samples']:,} samples x {len(summary['channels'])} channel(s), "
        f"{summary['dtype']} on {summary['device']}"
    )
    con.print(
        f"sampling rate: {'unknown' if rate is None else f'{rate:g} Hz'}; "
        f"duration: {'unknown' if dur is None else _human_seconds(dur)}"
    )
    if summary["n_nan"]:
        con.print(f"NaN values: {summary['n_nan']} ({summary['nan_policy']})")
    table = Table()
    for col in ("channel", "unit", "min", "max", "mean", "std"):
        table.add_column(col, justify="right" if col not in ("channel", "unit") else "left")
    for s in summary["channels"]:
        table.add_row(s["channel"], s["unit"] or "-", *(f"{s[k]:.4g}" for k in ("min", "max", "mean", "std")))
    con.print(table)
    t = summary["time"]
    if t is not None:
        con.print(f"time column: {t['n_rows']:,} rows, {t['start']} to {t['end']}, step {t['step_s']:g} s")
        con.print(f"  sorted on input: {'yes' if t['was_sorted'] else 'no (sorted now)'}")
        con.print(
            f"  duplicate timestamps: {t['n_duplicates']} ({t['duplicates_policy']})"
            + (f", e.g. {', '.join(t['duplicates'][:3])}" if t["duplicates"] else "")
        )
        con.print(
            f"  gaps: {t['n_gaps']}, missing {t['missing_steps']} step(s)"
            + (f", e.g. {t['gaps'][0][0]} -> {t['gaps'][0][1]}" if t["gaps"] else "")
        )


def _human_seconds(s: float) -> str:
    if s >= 86400:
        return f"{s / 86400:.2f} d"
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.2f} s"


@app.command("read")
def read_cmd(
    input: Annotated[
        Path, typer.Argument(help="CSV, TSV, Parquet, NPY or WFDB record (.hea/.dat or the record name).")
    ],
    column: Annotated[
        list[str] | None,
        typer.Option(
            "--column",
            "--channel",
            "-c",
            help="Column (or WFDB channel), by name or position; repeatable. Default: all.",
        ),
    ] = None,
    time_column: Annotated[
        str | None, typer.Option(help="Column of timestamps: rows are sorted by it and gaps/duplicates reported.")
    ] = None,
    sampling_rate: Annotated[
        float | None, typer.Option(help="Sampling rate in Hz, when the file does not say.")
    ] = None,
    nan: Annotated[NanPolicy, typer.Option(help="What to do with NaN values.")] = NanPolicy.error,
    duplicates: Annotated[
        DuplicatePolicy, typer.Option(help="With --time-column: rows sharing a timestamp.")
    ] = DuplicatePolicy.keep,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Read a recording onto the device and summarise it (shape, rate, statistics, time irregularities)."""
    from devicepipe.io import read_series

    rec = read_series(
        input,
        _columns(column),
        device=device,
        sampling_rate=sampling_rate,
        time_column=_maybe_int(time_column),
        nan=nan.value,
        duplicates=duplicates.value,
    )
    summary = _recording_summary(rec)
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        _print_summary(summary, _console())


def _maybe_int(value: str | None) -> str | int | None:
    if value is None:
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def _columns(values: list[str] | None) -> list[str | int] | None:
    if not values:
        return None
    return [_maybe_int(v) for v in values]


# ----------------------------------------------------------------------------- simulate

_SIGNAL_SUFFIXES = (".csv", ".parquet", ".npy")


def _check_out(out: Path) -> str:
    suffix = out.suffix.lower()
    if suffix not in _SIGNAL_SUFFIXES:
        raise DevicepipeError(f"cannot write {out.name}: use a .csv, .parquet or .npy file name for --out.")
    return suffix


def _truth_path(out: Path) -> Path:
    return out.with_name(out.stem + ".truth.csv")


@simulate_app.command("ecg")
def simulate_ecg_cmd(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output file: .csv, .parquet or .npy. The truth goes to NAME.truth.csv.")
    ],
    duration: Annotated[str, typer.Option(help="Length, e.g. 30min, 24h, 90s.")] = "30min",
    sampling_rate: Annotated[float, typer.Option(help="Sampling rate in Hz.", min=50, max=10000)] = 250.0,
    heart_rate: Annotated[float, typer.Option(help="Mean heart rate in beats per minute.", min=20, max=250)] = 70.0,
    noise: Annotated[float, typer.Option(help="White noise standard deviation in mV.", min=0)] = 0.02,
    wander: Annotated[float, typer.Option(help="Baseline wander amplitude in mV.", min=0)] = 0.15,
    ectopic_rate: Annotated[
        float, typer.Option(help="Share of premature ventricular beats (0 to 0.5).", min=0, max=0.49)
    ] = 0.0,
    inverted: Annotated[bool, typer.Option("--inverted", help="Invert the polarity (negative QRS).")] = False,
    seed: Annotated[int, typer.Option(help="Random seed; the same seed gives the same recording.")] = 0,
) -> None:
    """Simulate an ECG with known R peaks (Gaussian P-QRS-T waves, heart-rate variability, wander, noise)."""
    from devicepipe.units import parse_duration

    suffix = _check_out(out)
    seconds = parse_duration(duration)
    started = time.perf_counter()
    sim = _simulate_ecg_files(
        out,
        suffix,
        seconds,
        sampling_rate,
        heart_rate=heart_rate,
        noise=noise,
        wander=wander,
        ectopic_rate=ectopic_rate,
        inverted=inverted,
        seed=seed,
    )
    con = _console()
    n_v = int((sim.symbols == "V").sum())
    con.print(
        f"wrote {out} ({sim.signal.numel():,} samples at {sampling_rate:g} Hz, {_human_seconds(sim.duration_s)}) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    con.print(f"truth: {_truth_path(out)} ({sim.r_peaks.numel():,} beats, {n_v} ventricular ectopic)")


def _simulate_ecg_files(out: Path, suffix: str, seconds: float, sampling_rate: float, **kwargs: Any) -> Any:
    import numpy as np

    from devicepipe.io import write_csv, write_npy, write_parquet
    from devicepipe.simulate import simulate_ecg

    sim = simulate_ecg(
        seconds,
        sampling_rate,
        heart_rate_bpm=kwargs["heart_rate"],
        noise_mV=kwargs["noise"],
        wander_mV=kwargs["wander"],
        ectopic_rate=kwargs["ectopic_rate"],
        inverted=kwargs["inverted"],
        seed=kwargs["seed"],
    )
    if suffix == ".csv":
        write_csv({"ecg": sim.signal}, out)
    elif suffix == ".parquet":
        write_parquet({"ecg": sim.signal}, out, sampling_rate=sampling_rate)
    else:
        write_npy(sim.signal, out)
    peaks = sim.r_peaks.cpu().numpy()
    write_csv({"sample": peaks, "time_s": peaks / sampling_rate, "symbol": np.asarray(sim.symbols)}, _truth_path(out))
    return sim


@simulate_app.command("load")
def simulate_load_cmd(
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Output file: .csv or .parquet (Datetime and load_MW columns). Anomalous days go to NAME.truth.csv.",
        ),
    ],
    days: Annotated[int, typer.Option(help="Number of days.", min=21)] = 365,
    samples_per_day: Annotated[int, typer.Option(help="Samples per day (24 = hourly).", min=4)] = 24,
    start: Annotated[str, typer.Option(help="First day, YYYY-MM-DD.")] = "2020-01-01",
    anomalies: Annotated[int, typer.Option(help="Number of anomalous days.", min=0)] = 6,
    noise: Annotated[float, typer.Option(help="Relative noise (0.02 = 2 %).", min=0)] = 0.02,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Simulate a load series (daily, weekly, yearly cycles) with a few anomalous days of known kind."""
    from devicepipe.io import write_csv, write_parquet
    from devicepipe.simulate import simulate_load

    suffix = _check_out(out)
    if suffix == ".npy":
        raise DevicepipeError("a load series has timestamps: use a .csv or .parquet file name for --out.")
    sim = simulate_load(
        days, samples_per_day=samples_per_day, start=start, n_anomalies=anomalies, noise=noise, seed=seed
    )
    table = {"Datetime": sim.timestamps, "load_MW": sim.values}
    (write_csv if suffix == ".csv" else write_parquet)(table, out)
    write_csv({"day": sim.anomalous_days.astype(str), "kind": list(sim.anomaly_kinds)}, _truth_path(out))
    con = _console()
    con.print(f"wrote {out} ({sim.values.numel():,} samples, {days} days from {start})")
    con.print(f"truth: {_truth_path(out)} ({len(sim.anomaly_kinds)} anomalous days)")


# ----------------------------------------------------------------------------- beats


class PeakMethod(StrEnum):
    ricker = "ricker"
    seed = "seed"


class SegmentMode(StrEnum):
    seed = "seed"
    centered = "centered"


@app.command()
def beats(
    input: Annotated[Path, typer.Argument(help="ECG: CSV, Parquet, NPY or WFDB record (e.g. mitdb/100).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for beats.parquet, beat_matrix.npy, figures.")],
    channel: Annotated[
        str | None, typer.Option("--channel", "-c", help="Channel or column, by name or position. Default: the first.")
    ] = None,
    sampling_rate: Annotated[
        float | None, typer.Option(help="Sampling rate in Hz, when the file does not say (CSV, NPY).")
    ] = None,
    method: Annotated[
        PeakMethod, typer.Option(help="ricker (accurate) or seed (the notebook's recipe).")
    ] = PeakMethod.ricker,
    mode: Annotated[
        SegmentMode, typer.Option(help="seed: peak-to-peak beats of 0.4-1.024 s, zero-padded; centered: fixed windows.")
    ] = SegmentMode.seed,
    reference: Annotated[
        Path | None, typer.Option(help="WFDB annotation file (e.g. mitdb/100.atr): also print the accuracy.")
    ] = None,
    device: DeviceOpt = "auto",
    figures: Annotated[bool, typer.Option(help="Write excerpt.png and intervals.png.")] = True,
) -> None:
    """Find the heartbeats of an ECG, cut them into a fixed-width matrix and plot them."""
    from devicepipe.pipeline import run_beats

    con = _console()
    with con.status("finding beats ...") as status:
        result = run_beats(
            input,
            out,
            channel=_maybe_int(channel),
            sampling_rate=sampling_rate,
            method=method.value,
            mode=mode.value,
            device=device,
            reference=reference,
            figures=figures,
            progress=lambda msg: status.update(msg),
        )
    hr = result.mean_heart_rate_bpm
    con.print(
        f"[bold]{result.source}[/bold] ({result.channel}, {result.sampling_rate:g} Hz, "
        f"{_human_seconds(result.n_samples / result.sampling_rate)}) on {result.device}"
    )
    con.print(
        f"beats found: {result.peaks.size:,}; median heart rate: {'-' if hr is None else f'{hr:.0f} bpm'}; "
        f"kept by segmentation: {int(result.beats.kept.sum()):,} ({100 * result.beats.share_kept:.1f} %), "
        f"matrix {tuple(result.beats.matrix.shape)}"
    )
    con.print("seconds: " + ", ".join(f"{k} {v:.3f}" for k, v in result.seconds.items()))
    if result.score is not None:
        s = result.score
        con.print(
            f"accuracy against {reference}: TP {s.tp}, FP {s.fp}, FN {s.fn}; sensitivity {s.sensitivity:.4f}, "
            f"positive predictivity {s.ppv:.4f}, F1 {s.f1:.4f}"
        )
    con.print(f"wrote {', '.join(str(p) for p in result.files.values())}")


# ----------------------------------------------------------------------------- interop


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.2f} s"


@app.command()
def interop(
    size: Annotated[
        int, typer.Option(help="Elements of the float32 array converted (default 100 M = 400 MB).", min=1)
    ] = (100_000_000),
    repeats: Annotated[int, typer.Option(help="Timed repeats per conversion (median shown).", min=1)] = 3,
    as_json: JsonOpt = False,
) -> None:
    """Which libraries hand data to which without a copy, proven by pointer, and how long each way takes."""
    from devicepipe.bench.interop import handoff_comparison, installed_kinds, interop_matrix

    con = _console()
    kinds = installed_kinds()
    with con.status("converting ...") as status:
        pairs = interop_matrix(size, kinds, repeats=repeats, progress=lambda m: status.update(f"converting {m} ..."))
        status.update("timing the host round trip against the zero-copy handoff ...")
        handoff = handoff_comparison(size, repeats=repeats)
    if as_json:
        sys.stdout.write(
            json.dumps(
                {"size": size, "kinds": kinds, "pairs": [p.__dict__ for p in pairs], "handoff": handoff}, indent=2
            )
            + "\n"
        )
        return
    table = Table(title=f"source -> target, {size:,} float32 elements ({size * 4 / 1e6:,.0f} MB), median of {repeats}")
    table.add_column("source \\ target")
    for k in kinds:
        table.add_column(k, justify="center")
    cells = {(p.source, p.target): p for p in pairs}
    style = {"zero-copy": "green", "copy": "yellow", "unsupported": "dim"}
    for src in kinds:
        row = []
        for dst in kinds:
            p = cells[(src, dst)]
            row.append(f"[{style[p.status]}]{p.status}[/{style[p.status]}]\n{_ms(p.seconds)}")
        table.add_row(src, *row)
    con.print(table)
    missing = [
        k for k in ("torch", "numpy", "pyarrow", "pandas", "polars", "jax", "cupy", "cudf", "numba") if k not in kinds
    ]
    if missing:
        con.print(f"not available here: {', '.join(missing)}")
    slow, fast = handoff["naive_host_round_trip"], handoff["zero_copy_handoff"]
    con.print(
        f"{handoff['source']} column -> torch on {handoff['device']}: host round trip {_ms(slow['median_s'])}, "
        f"zero-copy handoff {_ms(fast['median_s'])} (shares memory: {handoff['handoff_shares_memory']}), "
        f"{handoff['speedup']:.0f}x"
    )


# ----------------------------------------------------------------------------- learning


EpochsOpt = Annotated[int, typer.Option(help="Training epochs.", min=1)]
BatchOpt = Annotated[int, typer.Option(help="Rows per training batch.", min=1)]
LrOpt = Annotated[float, typer.Option(help="Adam learning rate.", min=1e-7, max=0.99)]
EnsembleOpt = Annotated[int, typer.Option(help="Train N models at once with torch.func.vmap (N > 1).", min=1, max=64)]
SeedOpt = Annotated[int, typer.Option(help="Random seed (split, initialisation, batch order, noise).")]
PercentileOpt = Annotated[
    float, typer.Option(help="Flag rows scoring above this percentile of the training rows.", min=50, max=99.999)
]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")]
TensorboardOpt = Annotated[Path | None, typer.Option(help="Also log losses for TensorBoard to this directory.")]
Bf16Opt = Annotated[bool, typer.Option("--bf16", help="bfloat16 autocast (CUDA only).")]


def _learn_settings(*, tensorboard: Path | None, **values: Any):
    """Training settings from the command's options, checked before anything is written."""
    from devicepipe.pipeline import LearnSettings

    settings = LearnSettings(tensorboard=None if tensorboard is None else str(tensorboard), **values)
    settings.check()
    return settings


def _train_progress(con: Console, epochs: int, label: str):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[loss]}"),
        TimeRemainingColumn(),
        console=con,
        transient=False,
    )
    task = progress.add_task(label, total=epochs, loss="")

    def update(epoch: int, train: float, val: float) -> None:
        progress.update(task, completed=epoch, loss=f"loss {train:.4g} (val {val:.4g})")

    return progress, update


def _print_outputs(con: Console, result, first: list[str]) -> None:
    files = result.files
    con.print(f"outputs in [bold]{result.out}[/bold]: {', '.join(sorted(p.name for p in files.values()))}")
    con.print("open first: " + ", ".join(str(result.out / f) for f in first if f in files))


@app.command()
def ecg(
    input: Annotated[Path, typer.Argument(help="ECG: CSV, Parquet, NPY or WFDB record (e.g. mitdb/100).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory for every output.")],
    device: DeviceOpt = "auto",
    channel: Annotated[
        str | None, typer.Option("--channel", "-c", help="Channel by name or position (default: first).")
    ] = None,
    sampling_rate: Annotated[
        float | None, typer.Option(help="Sampling rate in Hz, when the file does not say.")
    ] = None,
    epochs: EpochsOpt = 30,
    batch_size: BatchOpt = 256,
    lr: LrOpt = 3e-3,
    latent: Annotated[int, typer.Option(help="Latent dimensions of the VAE.", min=1, max=64)] = 2,
    ensemble: EnsembleOpt = 1,
    mode: Annotated[SegmentMode, typer.Option(help="centered: windows around each R peak; seed: peak to peak.")] = (
        SegmentMode.centered
    ),
    width: Annotated[int, typer.Option(help="Samples per beat row (a power of two).", min=8)] = 256,
    seed: SeedOpt = 0,
    percentile: PercentileOpt = 99.0,
    resume: ResumeOpt = False,
    tensorboard: TensorboardOpt = None,
    bf16: Bf16Opt = False,
) -> None:
    """Find the heartbeats of an ECG, train a convolutional VAE on them, score and plot every beat."""
    from devicepipe.pipeline import run_ecg

    settings = _learn_settings(
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        latent=latent,
        ensemble=ensemble,
        percentile=percentile,
        resume=resume,
        bf16=bf16,
        tensorboard=tensorboard,
    )
    from devicepipe.models import LightVAEConfig

    LightVAEConfig(width=width, latent=latent)
    con = _console()
    progress, update = _train_progress(con, epochs, "training" if ensemble == 1 else f"training {ensemble} members")
    with progress:
        result = run_ecg(
            input,
            out,
            settings=settings,
            channel=_maybe_int(channel),
            sampling_rate=sampling_rate,
            device=device,
            mode=mode.value,
            width=width,
            progress=lambda m: con.print(m),
            epoch_progress=update,
        )
    s = result.summary
    c = s["counts"]
    con.print(
        f"{c['beats_found']:,} beats found, {c['beats_kept']:,} modelled, {c['flagged']:,} flagged as anomalous "
        f"(score above {s['threshold']:.4g}); final loss {s['final_loss']['train'][0]:.4g}"
    )
    con.print("seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in s["seconds"].items()))
    _print_outputs(con, result, ["extremes.png", "latent.png", "generated.png", "training.png"])


@app.command()
def series(
    input: Annotated[Path, typer.Argument(help="A time-indexed load series: CSV or Parquet.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory for every output.")],
    column: Annotated[
        str | None, typer.Option("--column", "-c", help="The value column (default: the only one).")
    ] = None,
    time_column: Annotated[str, typer.Option(help="The timestamp column.")] = "Datetime",
    window: Annotated[str, typer.Option(help="Window length: 1d (days), 12h, 7d ...")] = "1d",
    pointwise: Annotated[
        bool, typer.Option("--pointwise", help="The notebook's per-sample autoencoder (input size 1).")
    ] = False,
    device: DeviceOpt = "auto",
    epochs: EpochsOpt = 200,
    batch_size: BatchOpt = 64,
    lr: LrOpt = 1e-3,
    hidden: Annotated[int, typer.Option(help="Hidden units.", min=1)] = 32,
    latent: Annotated[int, typer.Option(help="Code size.", min=1, max=256)] = 8,
    ensemble: EnsembleOpt = 1,
    seed: SeedOpt = 0,
    percentile: PercentileOpt = 99.0,
    resume: ResumeOpt = False,
    tensorboard: TensorboardOpt = None,
) -> None:
    """Cut a load series into windows (days by default), train an MLP autoencoder, flag anomalous windows."""
    from devicepipe.pipeline import run_series

    settings = _learn_settings(
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        latent=latent,
        ensemble=ensemble,
        percentile=percentile,
        resume=resume,
        tensorboard=tensorboard,
    )
    from devicepipe.units import parse_duration

    parse_duration(window)
    con = _console()
    progress, update = _train_progress(con, epochs, "training")
    with progress:
        result = run_series(
            input,
            out,
            column=_maybe_int(column),
            time_column=_maybe_int(time_column),
            window=window,
            pointwise=pointwise,
            settings=settings,
            hidden=hidden,
            device=device,
            progress=lambda m: con.print(m),
            epoch_progress=update,
        )
    s = result.summary
    w = s["windows"]
    con.print(
        f"{w['used']:,} windows of {window} ({s['steps_per_window']} steps); {w['windows_with_filled_slots']} "
        f"had gaps filled ({w['filled_slots']} slots), {len(w['dropped'])} dropped; duplicates averaged: "
        f"{s['time']['n_duplicates']}"
    )
    con.print(
        f"{len(s['flagged'])} windows flagged (score above {s['threshold']:.4g}); the top ones: "
        + ", ".join(f["start"][:10] for f in s["flagged"][:8])
    )
    _print_outputs(con, result, ["days.png", "extremes.png", "latent.png", "training.png"])


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the demo's files.")] = Path("demo-run"),
    device: DeviceOpt = "auto",
    epochs: EpochsOpt = 30,
) -> None:
    """Simulate a 30-minute ECG with a few ectopic beats and run the whole ecg pipeline on it."""
    from devicepipe.io import check_output_dir
    from devicepipe.pipeline import LearnSettings, run_ecg

    check_output_dir(out)
    con = _console()
    path = out / "input" / "ecg.parquet"
    with con.status("simulating a 30-minute ECG at 250 Hz with a few ectopic beats ..."):
        sim = _simulate_ecg_files(
            path,
            ".parquet",
            1800.0,
            250.0,
            heart_rate=72.0,
            noise=0.03,
            wander=0.2,
            ectopic_rate=0.01,
            inverted=False,
            seed=0,
        )
    n_v = int((sim.symbols == "V").sum())
    con.print(
        f"simulated {path} ({sim.r_peaks.numel():,} beats, {n_v} ventricular ectopic; truth in {_truth_path(path)})"
    )
    progress, update = _train_progress(con, epochs, "training the VAE")
    with progress:
        result = run_ecg(
            path,
            out,
            settings=LearnSettings(epochs=epochs),
            device=device,
            progress=lambda m: con.print(m),
            epoch_progress=update,
        )
    import numpy as np
    import pyarrow.parquet as pq

    table = pq.read_table(out / "embeddings.parquet", columns=["peak", "flag"])
    flagged = table.column("peak").to_numpy()[table.column("flag").to_numpy()]
    truth_v = sim.r_peaks.cpu().numpy()[sim.symbols == "V"]
    found = int(sum(np.min(np.abs(flagged - v)) <= 5 for v in truth_v)) if flagged.size else 0
    con.print(
        f"{result.summary['counts']['flagged']} beats flagged as anomalous; {found} of the {n_v} simulated "
        "ventricular ectopic beats are among them"
    )
    _print_outputs(con, result, ["extremes.png", "latent.png", "generated.png", "training.png"])


@app.command()
def bench(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Directory for bench.json, bench.md and charts.")
    ] = None,
    device: Annotated[str, typer.Option("--device", "-d", help="Comma-separated devices, e.g. cpu,cuda.")] = "cpu,cuda",
    quick: Annotated[bool, typer.Option("--quick", help="Tiny sizes: checks that every benchmark runs.")] = False,
    only: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated stages or sections (stages, baselines, micro, "
            "crossover, peers, handoff; or stage names such as detect)."
        ),
    ] = None,
    samples: Annotated[
        int | None, typer.Option(help="Samples of the simulated ECG (default 20 M; quick 200 k).", min=10_000)
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None, typer.Option(help="Print the ratios between two bench.json files.")
    ] = (None),
) -> None:
    """Time every stage on every device, the notebooks' way, peers and the tutorials' micro-benchmarks."""
    from devicepipe.bench.report import compare as compare_results
    from devicepipe.bench.report import load_result, run_benchmarks, write_report
    from devicepipe.bench.stages import STAGES
    from devicepipe.device import resolve_device

    con = _console()
    if compare is not None:
        a, b = (load_result(p) for p in compare)
        rows = compare_results(a, b)
        if not rows:
            raise DevicepipeError("the two files share no measurement to compare; run the same benchmarks in both.")
        table = Table(title=f"A = {compare[0]}, B = {compare[1]}")
        for col in ("measurement", "A", "B", "A / B"):
            table.add_column(col, justify="right" if col != "measurement" else "left")
        for r in rows:
            table.add_row(r["name"], _ms(r["a_s"]), _ms(r["b_s"]), f"{r['ratio']:.2f}")
        con.print(table)
        return
    if out is None:
        raise DevicepipeError("bench needs --out DIR (or --compare A.json B.json).")
    from devicepipe.io import check_output_dir

    check_output_dir(out)
    names = [d.strip() for d in device.split(",") if d.strip()]
    import torch

    devices = []
    for name in names:
        if name.startswith("cuda") and not torch.cuda.is_available() and device == "cpu,cuda":
            continue  # the default list: cuda only where there is one
        devices.append(resolve_device(name))
    if not devices:
        raise DevicepipeError(f"no usable device in {device!r}; use --device cpu.")
    wanted = None
    if only:
        from devicepipe.bench.report import SECTIONS

        wanted = [w.strip() for w in only.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in SECTIONS and w not in STAGES]
        if unknown:
            raise DevicepipeError(f"unknown benchmark {unknown[0]!r}; choose from {list(SECTIONS) + list(STAGES)}.")
    with con.status("benchmarking ...") as status:
        result = run_benchmarks(
            devices,
            quick=quick,
            only=wanted,
            n_samples=samples,
            progress=lambda m: status.update(f"benchmarking: {m} ..."),
        )
        files = write_report(result, out)
    from devicepipe.bench.report import markdown

    con.print(markdown(result))
    con.print(f"wrote {', '.join(str(p) for p in files.values())}")


def main() -> None:
    """Entry point of the ``devicepipe`` console script."""
    app(prog_name="devicepipe")


if __name__ == "__main__":
    main()
