"""The ``devicepipe`` command: parse arguments, call the library, print.

This is the only module that prints. User mistakes (a bad path, an unknown column, a device
that is not there, a malformed option) end as one line on stderr and exit status 2. Choices
and defaults come from the library (its policies, methods, modes and settings classes).
"""

# ruff: noqa: E402 - the environment is set before torch is imported, below

from __future__ import annotations

import dataclasses
import errno
import gc
import io
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

# PyTorch backs CPU buffers of 2 MB and more with transparent huge pages when this is set
# (read once, at its first allocation, so before torch is used): a new full-length tensor
# then costs one page fault per 2 MB instead of per 4 KB, as NumPy's allocator already does.
# An explicit THP_MEM_ALLOC_ENABLE=0 in the environment turns it off.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

# Arrow's buffers (tables read and written) from the C library's allocator, as everything else's,
# not Arrow's default (mimalloc), which keeps what is freed to itself: a long recording's tables,
# written a part at a time, left 15 MiB more resident after a week of beats than after an hour.
# (Read at Arrow's first allocation; set in the environment, the user's choice stands.)
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

# A command on many recordings starts its local cluster's fork server now, so that the server's
# import of torch runs beside this process's own (devicepipe/prestart.py).
from devicepipe.prestart import pause_collector, resume_collector, start_worker_server, stop_worker_server

start_worker_server(sys.argv)
_COLLECTING = pause_collector()  # while the imports below run (devicepipe/prestart.py)

import torch
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from typer.core import TyperCommand, TyperGroup

from devicepipe import __version__
from devicepipe.bench.interop import handoff_comparison, installed_kinds, interop_matrix
from devicepipe.bench.report import (
    SECTIONS,
    bench_devices,
    check_only,
    format_ratio,
    load_result,
    markdown,
    run_benchmarks,
    write_report,
)
from devicepipe.bench.report import compare as compare_results
from devicepipe.bench.stages import STAGES
from devicepipe.datasets import INDEX_NAME, DatasetResult, Engine, is_dataset, run_dataset
from devicepipe.detector import BeatAnomalyDetector, load_model
from devicepipe.device import device_report
from devicepipe.ecg import ECG_PEAK_METHODS, EDGE_S, MATCH_TOLERANCE_S, SEGMENT_MODES
from devicepipe.errors import DevicepipeError
from devicepipe.io import DUPLICATE_POLICIES, NAN_POLICIES, check_output_dir, read_series
from devicepipe.io.channels import time_column_of
from devicepipe.learn import SCORERS
from devicepipe.pipeline import (
    BEAT_WIDTH,
    BEATS_MODE,
    ECG_MODE,
    SERIES_HIDDEN,
    SERIES_WINDOW,
    BeatsOptions,
    LearnResult,
    LearnSettings,
    SeriesLearnSettings,
    model_input,
    run_beats,
    run_demo,
    run_ecg,
    run_score,
    run_score_series,
    run_series,
    run_train,
)
from devicepipe.simulate import simulate_ecg, simulate_load, simulation_path, write_simulated_ecg, write_simulated_load
from devicepipe.train import distributed, start_distributed
from devicepipe.units import format_duration, parse_bytes, parse_duration

resume_collector(_COLLECTING)


class _PlainHelp:
    """Help in the usual shape: flags without a value placeholder, required arguments as ``INPUT``.

    Recent typer releases print ``<bool>`` beside every flag (as if it took a value) and
    ``{input}`` in the usage line; an empty metavar and Click's upper-case name undo both.
    """

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)  # type: ignore[misc]
        return [p[1:-1].upper() if p.startswith("{") and p.endswith("}") else p for p in pieces]


class _Command(_PlainHelp, TyperCommand):
    """A subcommand with :class:`_PlainHelp`."""


class _OneLineErrors(_PlainHelp, TyperGroup):
    """Turn usage errors and DevicepipeErrors into one line on stderr and exit status 2."""

    def _options_of(self, args: Any) -> set[str]:
        """The long options of the subcommand named in ``args`` (the command line when None)."""
        words = list(sys.argv[1:] if args is None else args)
        names = [w for w in words if not str(w).startswith("-")][:2]
        group: Any = self
        for name in names:
            command = group.commands.get(str(name)) if hasattr(group, "commands") else None
            if command is None:
                break
            group = command
        if group is self or not hasattr(group, "params"):
            return set()
        return {opt for param in group.params for opt in getattr(param, "opts", []) if opt.startswith("--")}

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
            _fail(exc.cli_message)
        except MemoryError as exc:
            _fail(_out_of_memory(exc, self._options_of(args)))
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                _fail(f"a path is too long for the file system{_file_of(exc, 80)}; give a shorter one.")
            if not _is_disk_full(exc):
                raise
            where = " or choose an --out on a disk with room" if "--out" in self._options_of(args) else ""
            _fail(f"the disk is full: {exc.strerror or exc}{_file_of(exc)}; free space{where}.")
        except Exception as exc:
            if _is_out_of_memory(exc):
                _fail(_out_of_memory(exc, self._options_of(args)))
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


def _is_disk_full(exc: OSError) -> bool:
    """An OSError that says the disk (or the user's quota on it) is full (NumPy's own words too)."""
    return exc.errno in (errno.ENOSPC, errno.EDQUOT) or "not enough free space" in str(exc).lower()


def _file_of(exc: OSError, width: int | None = None) -> str:
    """The file an OSError names, in parentheses (its first ``width`` characters), or nothing."""
    name = str(exc.filename) if exc.filename else ""
    if width is not None and len(name) > width:
        name = f"{name[: width - 3]}..."
    return f" ({name})" if name else ""


_OOM = re.compile(r"out of memory|can't allocate memory|not enough memory|failed to allocate", re.IGNORECASE)
_ASKED = re.compile(r"(?:tried to allocate|allocate) (\d[\d.,]*\s*(?:[KMGT]i?B|bytes))", re.IGNORECASE)


def _is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(exc, RuntimeError) and bool(_OOM.search(str(exc)))
    )


def _out_of_memory(exc: BaseException, options: set[str] | None = None) -> str:
    """One line for running out of memory: how much was asked for, and what to try with the
    options the command has (``options``: its long options)."""
    asked = _ASKED.search(str(exc))
    size = ""
    if asked:
        amount = asked.group(1)
        digits = amount.split()[0]
        size = f" (asked for {int(digits):,} bytes)" if digits.isdigit() else f" (asked for {amount})"
    gpu = isinstance(exc, torch.OutOfMemoryError) or "CUDA" in str(exc)
    where = "the GPU" if gpu else "this machine"
    options = options or set()
    tries = []
    if "--duration" in options:
        tries.append("a shorter --duration")
    if "--chunk" in options:
        tries.append("--chunk 10min (the recording in pieces)")
    if "--memory-budget" in options:
        tries.append("a smaller --memory-budget")
    if "--batch-size" in options:
        tries.append("a smaller --batch-size")
    if gpu and "--device" in options:
        tries.append("--device cpu")
    fixes = ", ".join(["a shorter recording", *tries[:-1]]) + (f" or {tries[-1]}" if tries else "")
    return f"out of memory on {where}{size}: the data or the model does not fit; try {fixes}."


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


def _print_version(asked: bool) -> None:
    if asked:
        sys.stdout.write(f"devicepipe {__version__}\n")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True)
    ] = False,
) -> None:
    pass


def _console() -> Console:
    """Rich output on a terminal; elsewhere (a log, CI, a pipe) whole lines, not wrapped at 80 columns."""
    con = Console(highlight=False)
    if con.is_terminal:
        return con
    return Console(highlight=False, soft_wrap=True, width=max(con.width, 160))


def _choices(name: str, values: Any) -> type[StrEnum]:
    """A str Enum of the library's accepted values, for typer to list and check."""
    return StrEnum(name, {str(v): str(v) for v in values})


NanPolicy = _choices("NanPolicy", NAN_POLICIES)
DuplicatePolicy = _choices("DuplicatePolicy", DUPLICATE_POLICIES)
PeakMethod = _choices("PeakMethod", ECG_PEAK_METHODS)
SegmentMode = _choices("SegmentMode", SEGMENT_MODES)

DeviceOpt = Annotated[str, typer.Option("--device", "-d", help="auto, cpu, cuda or cuda:N.")]
EcgChannelOpt = Annotated[
    str | None,
    typer.Option(
        "--channel",
        "-c",
        help="Channel or column, by name or position (default: the first signal named as an ECG lead in an EDF "
        "or WFDB record, the first column after any time or sample-number columns in a table, else the first); "
        "'all' finds the beats on every lead together (a flat or noisy lead left out) and cuts them from the first.",
    ),
]
EncodingOpt = Annotated[
    str | None,
    typer.Option(help="Text encoding of a CSV, e.g. latin-1 (default: UTF-8, or UTF-16 by its mark)."),
]
TimeFormatOpt = Annotated[
    str | None,
    typer.Option(
        help="How the time column is written, in strptime codes (e.g. '%d/%m/%Y %H:%M' for day-first dates); "
        "default: ISO 8601 and the common forms."
    ),
]
NanOpt = Annotated[
    NanPolicy,
    typer.Option(
        help="Non-finite samples (NaN, inf, numbers beyond float32): error (the default, naming the first), "
        "drop their time points, or interpolate them."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
MinQualityOpt = Annotated[
    float | None,
    typer.Option(
        help="Leave beats in stretches of poor signal out of training (and, for ecg, out of the flags): those in "
        "a 10-s stretch whose beats' median correlation with the recording's typical beat is under this "
        "(say 0.5). A beat unlike the typical one in good signal stays (it may be the anomaly). Counted in "
        "summary.json.",
    ),
]


# ----------------------------------------------------------------------------- info


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.2f} s"


def _maybe_int(value: str | None) -> str | int | None:
    """A column given on the command line: a position when it is a whole number, else a name."""
    if value is None:
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def _columns(values: list[str] | None) -> list[str | int] | None:
    if not values:
        return None
    return [_maybe_int(v) for v in values]


@app.command(cls=_Command)
def info(as_json: JsonOpt = False) -> None:
    """Show Python, PyTorch and its CUDA build, the GPUs, the CPU and which optional libraries work."""
    report = device_report()
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    con = _console()
    t = report["torch"]
    con.print(f"[bold]devicepipe {report['devicepipe']}[/bold] on Python {report['python']} ({report['platform']})")
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


def _print_summary(summary: dict[str, Any], con: Console) -> None:
    rate = summary["sampling_rate_hz"]
    dur = summary["duration_s"]
    con.print(
        f"[bold]{summary['source']}[/bold]: {summary['n_samples']:,} samples x {len(summary['channels'])} channel(s), "
        f"{summary['dtype']} on {summary['device']}"
    )
    said = "unknown" if rate is None else f"{rate:g} Hz"
    if rate is not None and 0 < rate < 1:  # a meter's rate reads better as its step
        said += f" (a sample every {format_duration(1 / rate)})"
    con.print(f"sampling rate: {said}; duration: {'unknown' if dur is None else format_duration(dur)}")
    if summary["n_nan"]:
        con.print(f"non-finite values: {summary['n_nan']:,} ({summary['nan_policy']})")
    table = Table()
    for col in ("channel", "unit", "min", "max", "mean", "std"):
        table.add_column(col, justify="right" if col not in ("channel", "unit") else "left")
    for s in summary["channels"]:
        table.add_row(s["channel"], s["unit"] or "-", *(f"{s[k]:.4g}" for k in ("min", "max", "mean", "std")))
    con.print(table)
    t = summary["time"]
    if t is not None:
        step = format_duration(t["step_s"]) if t["step_s"] >= 1 else f"{t['step_s']:g} s"
        con.print(f"time column: {t['n_rows']:,} rows, {t['start']} to {t['end']}, step {step}")
        con.print(f"  sorted on input: {'yes' if t['was_sorted'] else 'no (sorted now)'}")
        con.print(
            f"  duplicate timestamps: {t['n_duplicates']} ({t['duplicates_policy']})"
            + (f", e.g. {', '.join(t['duplicates'][:3])}" if t["duplicates"] else "")
        )
        con.print(
            f"  gaps: {t['n_gaps']}, missing {t['missing_steps']} step(s)"
            + (f", e.g. {t['gaps'][0][0]} -> {t['gaps'][0][1]}" if t["gaps"] else "")
        )


@app.command("read", cls=_Command)
def read_cmd(
    input: Annotated[
        Path, typer.Argument(help="CSV, TSV, Parquet, NPY, EDF/BDF or WFDB record (.hea/.dat or the record name).")
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
        str | None,
        typer.Option(
            help="Column of timestamps: rows are sorted by it and gaps/duplicates reported "
            "(default: a table's first column of times, as series finds it)."
        ),
    ] = None,
    time_format: TimeFormatOpt = None,
    encoding: EncodingOpt = None,
    sampling_rate: Annotated[
        float | None, typer.Option(help="Sampling rate in Hz, when the file does not say.")
    ] = None,
    nan: NanOpt = NanPolicy["error"],
    duplicates: Annotated[
        DuplicatePolicy, typer.Option(help="With --time-column: rows sharing a timestamp.")
    ] = DuplicatePolicy["keep"],
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Read a recording onto the device and summarise it (shape, rate, statistics, time irregularities)."""
    times = _maybe_int(time_column) if time_column is not None else time_column_of(input)
    rec = read_series(
        input,
        _columns(column),
        device=device,
        sampling_rate=sampling_rate,
        time_column=times,
        time_format=time_format,
        encoding=encoding,
        nan=nan.value,
        duplicates=duplicates.value,
    )
    summary = rec.describe()
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return
    con = _console()
    if time_column is None and times is not None:
        con.print(f"times from column {times!r}; --time-column picks another")
    _print_summary(summary, con)


# ----------------------------------------------------------------------------- simulate


@simulate_app.command("ecg", cls=_Command)
def simulate_ecg_cmd(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output file: .csv, .parquet or .npy. The truth goes to NAME.truth.csv.")
    ],
    duration: Annotated[str, typer.Option(help="Length, e.g. 30min, 24h, 90s.")] = "30min",
    sampling_rate: Annotated[float, typer.Option(help="Sampling rate in Hz.", min=50, max=10000)] = 250.0,
    heart_rate: Annotated[float, typer.Option(help="Mean heart rate in beats per minute.", min=20, max=250)] = 70.0,
    noise: Annotated[float, typer.Option(help="White noise standard deviation in mV.", min=0)] = 0.02,
    wander: Annotated[float, typer.Option(help="Baseline wander amplitude in mV.", min=0)] = 0.15,
    ectopic_rate: Annotated[float, typer.Option(help="Share of premature ventricular beats.", min=0, max=0.49)] = 0.0,
    inverted: Annotated[bool, typer.Option("--inverted", help="Invert the polarity (negative QRS).")] = False,
    seed: Annotated[int, typer.Option(help="Random seed; the same seed gives the same recording.")] = 0,
) -> None:
    """Simulate an ECG with known R peaks (Gaussian P-QRS-T waves, heart-rate variability, wander, noise)."""
    simulation_path(out, "ecg")  # before the simulation, which may take a while
    started = time.perf_counter()
    sim = simulate_ecg(
        parse_duration(duration),
        sampling_rate,
        heart_rate_bpm=heart_rate,
        noise_mV=noise,
        wander_mV=wander,
        ectopic_rate=ectopic_rate,
        inverted=inverted,
        seed=seed,
    )
    _, truth = write_simulated_ecg(sim, out)
    con = _console()
    n_v = int((sim.symbols == "V").sum())
    con.print(
        f"wrote {out} ({sim.signal.numel():,} samples at {sampling_rate:g} Hz, {format_duration(sim.duration_s)}) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    con.print(f"truth: {truth} ({sim.r_peaks.numel():,} beats, {n_v} ventricular ectopic)")


@simulate_app.command("load", cls=_Command)
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
    simulation_path(out, "load")
    sim = simulate_load(
        days, samples_per_day=samples_per_day, start=start, n_anomalies=anomalies, noise=noise, seed=seed
    )
    _, truth = write_simulated_load(sim, out)
    con = _console()
    con.print(f"wrote {out} ({sim.values.numel():,} samples, {days} days from {start})")
    con.print(f"truth: {truth} ({len(sim.anomaly_kinds)} anomalous days)")


# ----------------------------------------------------------------------------- datasets

WorkersOpt = Annotated[
    int | None,
    typer.Option(
        help="For a folder, glob or list of recordings: Dask worker processes of the local cluster started here "
        "(default: one per core; the cores are divided among them; at most 4 a core, and no more than "
        "there are recordings), or 0 for a plain loop without Dask.",
        min=0,
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(
        help="For many recordings: the address of a running Dask scheduler (e.g. tcp://10.0.0.5:8786) to run on "
        "instead of a local cluster; its workers must see the same paths."
    ),
]
DevicesOpt = Annotated[
    str | None,
    typer.Option(
        help="For many recordings: one device per worker, comma-separated (e.g. cuda:0,cuda:1: one worker per GPU)."
    ),
]
ONE_ECG = "ECG: CSV, Parquet, NPY, EDF/BDF or WFDB record (e.g. mitdb/100)"
DATASET_INPUT = (
    "; or many: a folder, a quoted glob ('data/**/*.hea') or a .txt file listing paths, each written to its own "
    "run directory under --out with index.parquet"
)


def _engine(workers: int | None, scheduler: str | None, devices: str | None, device: str) -> Engine:
    listed = tuple(d.strip() for d in (devices or "").split(",") if d.strip())
    if devices is not None and not listed:
        raise DevicepipeError("--devices names no device; give e.g. --devices cuda:0,cuda:1.")
    if scheduler is not None and workers is not None:
        raise DevicepipeError("--workers starts a local cluster and --scheduler uses another; pass one of them.")
    return Engine(workers=workers, scheduler=scheduler, devices=listed or (device,))


def _dataset_reference(reference: Path | None) -> str | None:
    """In a dataset run, --reference is an annotation extension: every record's own file."""
    if reference is None:
        return None
    text = str(reference)
    if not re.fullmatch(r"\w+", text):
        raise DevicepipeError(
            f"--reference {text}: for many recordings give an annotation extension (e.g. --reference atr), "
            "and each WFDB record is scored against its own RECORD.atr."
        )
    return text


def _single_only(**given: Any) -> None:
    """Options that only mean something for many recordings, refused for one."""
    for name, value in given.items():
        if value is not None:
            raise DevicepipeError(f"--{name} is for many recordings (a folder, glob or list); drop it for one file.")


def _run_dataset_cli(
    kind: str,
    input: Path,
    out: Path,
    options: dict[str, Any],
    engine: Engine,
    reference: Path | None,
    resume: bool,
) -> None:
    """Run ``kind`` on every recording ``input`` names, with a progress bar; exit 1 when any failed."""
    con = _console()
    counts = {"ok": 0, "failed": 0}
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[green]{task.fields[ok]} ok[/green] [red]{task.fields[failed]} failed[/red]"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=con,
        disable=not con.is_terminal,
    )
    task = progress.add_task("recordings", total=None, ok=0, failed=0)

    def start(total: int, to_run: int) -> None:
        kept = f" ({total - to_run:,} complete from an earlier run)" if total != to_run else ""
        con.print(f"{total:,} recording{'' if total == 1 else 's'} in {input}{kept}")
        progress.update(task, total=total)

    def cluster(how: dict[str, Any]) -> None:
        if how["kind"] == "loop":
            con.print("running in this process, one recording after another (--workers 0)")
            return
        where = f"the Dask scheduler at {how['scheduler']}" if how["scheduler"] else "a local Dask cluster"
        threads = f", {how['threads_per_worker']} torch thread(s) each" if how["threads_per_worker"] else ""
        con.print(f"running on {where}: {how['workers']} worker(s){threads}")
        if how["dashboard"]:
            con.print(f"dashboard: {how['dashboard']}")

    def rows(done: list[dict[str, Any]]) -> None:
        for row in done:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
            if row["status"] == "failed":
                progress.console.print(f"[red]failed:[/red] {row['path']}: {row['error']}")
        progress.update(task, advance=len(done), ok=counts["ok"], failed=counts["failed"])

    try:
        with progress:
            result = run_dataset(
                input,
                out,
                kind=kind,
                options=options,
                engine=engine,
                reference=_dataset_reference(reference),
                resume=resume,
                on_start=start,
                on_rows=rows,
                on_cluster=cluster,
            )
    finally:
        stop_worker_server()  # no more workers: the fork server ends beside this process
    _print_dataset(con, result)
    if reference is not None and result.n_ok and not result.summary.get("accuracy"):
        con.print(
            f"[yellow]no record had a .{reference} file beside it (RECORD.{reference} next to RECORD.hea): "
            "none was scored[/yellow]"
        )
    if result.n_failed:
        raise typer.Exit(1)


def _print_dataset(con: Console, result: DatasetResult) -> None:
    s = result.summary
    if s.get("beats") is not None:
        flagged = "" if s.get("flagged") is None else f", {s['flagged']:,} flagged"
        con.print(
            f"{s['beats']:,} beats found{flagged} in {format_duration(s['duration_s'])} of recordings; "
            f"{s['seconds']['wall']:.1f} s wall"
        )
    acc = s.get("accuracy")
    if acc:
        con.print(
            f"accuracy against each record's .{acc['reference']}, {acc['records_scored']} record(s) "
            f"(a match within {1000 * MATCH_TOLERANCE_S:.0f} ms, all but the first and last {EDGE_S:g} s): "
            f"sensitivity {acc['sensitivity']:.4f}, positive predictivity {acc['ppv']:.4f}, F1 {acc['f1']:.4f}"
        )
    kept = f" ({result.n_resumed:,} from an earlier run)" if result.n_resumed else ""
    line = f"{result.n_ok:,} ok{kept}, {result.n_failed:,} failed: see {result.out / INDEX_NAME}"
    con.print(f"[bold]{line}[/bold]" if not result.n_failed else f"[bold red]{line}[/bold red]")


# ----------------------------------------------------------------------------- beats


@app.command(cls=_Command)
def beats(
    input: Annotated[Path, typer.Argument(help=ONE_ECG + DATASET_INPUT + ".")],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Directory for report.html, beats.parquet/.csv, RECORD.qrs, beat_matrix.npy, figures."
        ),
    ],
    channel: EcgChannelOpt = None,
    sampling_rate: Annotated[
        float | None, typer.Option(help="Sampling rate in Hz, when the file does not say (CSV, NPY).")
    ] = None,
    method: Annotated[PeakMethod, typer.Option(help="ricker (accurate) or seed (the notebook's recipe).")] = PeakMethod[
        "ricker"
    ],
    mode: Annotated[
        SegmentMode,
        typer.Option(
            help="seed (the default here, the notebook's beat matrix): peak-to-peak beats of 0.4-1.024 s, "
            "zero-padded; centered (the default of 'ecg', for learning): a fixed window around each R peak."
        ),
    ] = SegmentMode[BEATS_MODE],
    reference: Annotated[
        Path | None,
        typer.Option(
            help="Reference beats, to print the accuracy: a WFDB annotation file (e.g. mitdb/100.atr) or a "
            "CSV/Parquet with a 'sample' (indices) or 'time_s' (seconds) column, such as simulate's NAME.truth.csv; "
            "for many recordings, an annotation extension (atr): each WFDB record's own RECORD.atr."
        ),
    ] = None,
    device: DeviceOpt = "auto",
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    figures: Annotated[bool, typer.Option(help="Write excerpt.png, heart_rate.png and intervals.png.")] = True,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Refuse (exit 2, nothing written) when the beats say a setting is wrong: no beat in over a "
            "minute, or a median heart rate outside 20-300 bpm.",
        ),
    ] = False,
    chunk: Annotated[
        str | None,
        typer.Option(
            help="Read and detect the recording in chunks of this duration (e.g. 10min): memory stays flat "
            "however long it is, and the beats are those of one piece."
        ),
    ] = None,
    memory_budget: Annotated[
        str | None,
        typer.Option(
            help="Detect in chunks by itself when one piece would need more memory than this (e.g. 2GB). "
            "Default: a quarter of the device's free memory."
        ),
    ] = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    devices: DevicesOpt = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="For many recordings: skip those whose run directory is complete.")
    ] = False,
) -> None:
    """Find the heartbeats of an ECG, cut them into a fixed-width matrix and plot them.

    Given a folder, a glob or a list of recordings, runs each (on a Dask cluster) into its own
    directory under --out, with index.parquet (one row per recording) and summary.json.
    """
    options = BeatsOptions(
        channel=_maybe_int(channel),
        sampling_rate=sampling_rate,
        method=method.value,
        mode=mode.value,
        nan=nan.value,
        encoding=encoding,
        figures=figures,
        strict=strict,
        chunk=chunk,
        memory_budget=None if memory_budget is None else parse_bytes(memory_budget),
    )
    if is_dataset(input):
        # no GPU, no transfers to count; the ledger would cost a fifth of a 10-s ECG's run
        many = dataclasses.replace(options, count_transfers=torch.cuda.is_available())
        engine = _engine(workers, scheduler, devices, device)
        _run_dataset_cli("beats", input, out, dataclasses.asdict(many), engine, reference, resume)
        return
    _single_only(workers=workers, scheduler=scheduler, devices=devices, resume=resume or None)
    con = _console()
    with con.status("finding beats ...") as status:
        result = run_beats(
            input,
            out,
            device=device,
            reference=reference,
            progress=lambda msg: status.update(msg),
            **dataclasses.asdict(options),
        )
    hr = result.mean_heart_rate_bpm
    con.print(
        f"[bold]{result.source}[/bold] ({result.channel}, {result.sampling_rate:g} Hz, "
        f"{format_duration(result.n_samples / result.sampling_rate)}) on {result.device}"
    )
    kept = int(torch.count_nonzero(result.beats.kept))  # (a count: no copy of the mask, as a sum would make)
    con.print(
        f"beats found: {result.peaks.size:,}; median heart rate: {'-' if hr is None else f'{hr:.0f} bpm'}; "
        f"kept by segmentation: {kept:,} ({100 * result.beats.share_kept:.1f} %), "
        f"matrix {tuple(result.beats.matrix.shape)}"
    )
    con.print("seconds: " + ", ".join(f"{k} {v:.3f}" for k, v in result.seconds.items()))
    if result.score is not None:
        s = result.score
        con.print(
            f"accuracy against {reference}, inside the scoring window (all but the first and last {EDGE_S:g} s; "
            f"{s.tp + s.fn:,} reference beats and {s.tp + s.fp:,} found beats in it; a match within "
            f"{1000 * MATCH_TOLERANCE_S:.0f} ms): {s}"
        )
    con.print(f"wrote {', '.join(str(p) for p in result.files.values())}")
    for warning in result.warnings:
        _warn(con, warning)
    if "report.html" in result.files:
        con.print(f"open first: {result.files['report.html']}")


# ----------------------------------------------------------------------------- interop


@app.command(cls=_Command)
def interop(
    size: Annotated[
        int, typer.Option(help="Elements of the float32 array converted (default 100 M = 400 MB).", min=1)
    ] = (100_000_000),
    repeats: Annotated[int, typer.Option(help="Timed repeats per conversion (median shown).", min=1)] = 3,
    as_json: JsonOpt = False,
) -> None:
    """Which libraries hand data to which without a copy, proven by pointer, and how long each way takes."""
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
        f"{format_ratio(handoff['speedup'])}"
    )


# ----------------------------------------------------------------------------- learning

ECG, SERIES = LearnSettings, SeriesLearnSettings  # the defaults of each learning command
EpochsOpt = Annotated[
    int | None,
    typer.Option(
        help="Train exactly N epochs. Default: until the validation loss stops improving (at most --max-epochs), "
        "keeping the best epoch's weights.",
        min=1,
    ),
]
MaxEpochsOpt = Annotated[int, typer.Option(help="The most epochs training may run when it stops by itself.", min=1)]
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
Scorer = _choices("Scorer", SCORERS)
ScorerOpt = Annotated[
    Scorer | None,
    typer.Option(
        help="How a row is scored. local (default): at its own resolution and at halves of it down to 8 samples, "
        "how far it lies from the nearest weighted mean of its nearest training rows past the k - 1 nearest, as "
        "a robust z-score, the largest; multiscale: the distance to the k nearest training rows at halves down to "
        "16 samples; knn: that distance at its own resolution; reconstruction: the model's reconstruction error; "
        "combined: knn and reconstruction as robust z-scores. --pointwise takes reconstruction.",
        show_default=False,
    ),
]
NeighboursOpt = Annotated[
    int | None,
    typer.Option(
        help="k of the local, multiscale and knn scorers (local: rows are rebuilt past their k - 1 nearest). "
        "Default: floor(share flagged x training rows) + 1, so that a group of anomalous training rows up to that "
        "share cannot hide each other.",
        min=1,
        show_default=False,
    ),
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        help="CPU threads for training and scoring. Default: 1 for small models, every core for large ones "
        "(or the DEVICEPIPE_THREADS environment variable).",
        min=1,
    ),
]


@contextmanager
def _epoch_bar(
    con: Console, epochs: int, label: str, *, exact: bool = False
) -> Iterator[Callable[[int, float, float], None]]:
    """Training progress: a bar on a terminal, shown from the first finished epoch (so an early
    error prints alone); elsewhere a plain line every twentieth of the epochs. ``exact``: training
    runs all ``epochs`` (else it may stop earlier)."""
    if not con.is_terminal:
        every = max(1, epochs // 20)
        of = "of" if exact else "of at most"

        def line(epoch: int, train: float, val: float) -> None:
            if epoch == 1 or epoch % every == 0 or epoch == epochs:
                con.print(f"{label}: epoch {epoch} {of} {epochs}, loss {train:.4g} (val {val:.4g})")

        yield line
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[loss]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=con,
        transient=False,
    )
    task = progress.add_task(label, total=epochs, loss="")

    def update(epoch: int, train: float, val: float) -> None:
        if not progress.live.is_started:
            progress.start()
        progress.update(task, completed=epoch, loss=f"loss {train:.4g} (val {val:.4g})")

    try:
        yield update
    finally:
        if progress.live.is_started:
            progress.stop()


def _print_outputs(con: Console, result: LearnResult, first: list[str]) -> None:
    files = result.files
    con.print(f"outputs in [bold]{result.out}[/bold]: {', '.join(sorted(p.name for p in files.values()))}")
    con.print("open first: " + ", ".join(str(result.out / f) for f in ["report.html", *first] if f in files))


ECG_FIGURES = ["extremes.png", "latent.png", "generated.png", "training.png"]


def _print_training(con: Console, s: dict[str, Any]) -> None:
    """How long training ran, whose weights were kept, on how many threads; and, in colour, the
    warning when a model was still learning when training ended."""
    e, t = s["epochs"], s["threads"]
    runs, kept = sorted(set(e["run"])), sorted(set(e["kept"]))
    span = "-".join(map(str, runs[:: max(1, len(runs) - 1)]))
    if s["settings"].get("epochs") is not None:
        trained = f"trained {span} epochs (as asked)"
    elif any(e["stopped_early"]):
        trained = f"trained {span} of at most {e['limit']} epochs (stopped when the validation loss no longer improved)"
    else:
        trained = f"trained {span} of at most {e['limit']} epochs (ran to the limit)"
    con.print(
        f"{trained}; kept the weights of epoch {'-'.join(map(str, kept[:: max(1, len(kept) - 1)]))}; "
        f"{t['threads']} CPU thread{'s' if t['threads'] > 1 else ''} ({t['reason']})"
    )
    for warning in s.get("warnings", []):
        _warn(con, warning)


def _warn(con: Console, warning: str) -> None:
    """A warning on stderr (so that it shows even when the output is piped), in colour on a terminal."""
    err = Console(stderr=True, highlight=False, soft_wrap=not con.is_terminal)
    err.print(f"[bold yellow]warning:[/bold yellow] {warning}")


def _final_loss(s: dict[str, Any]) -> str:
    losses = s["final_loss"]["train"]
    if len(losses) == 1:
        return f"final loss {losses[0]:.4g}"
    return f"final loss {sum(losses) / len(losses):.4g} (mean of {len(losses)} members)"


def _print_ecg(con: Console, s: dict[str, Any]) -> None:
    c = s["counts"]
    con.print(
        f"{c['beats_found']:,} beats found, {c['beats_kept']:,} kept (their window lies inside the recording), "
        f"{c['flagged']:,} flagged as anomalous (score above {s['threshold']:.4g}); {_final_loss(s)}"
    )
    left = s.get("quality", {}).get("left_out_of_training_and_flags")
    if left is not None:
        con.print(
            f"{left:,} beats of poor signal quality (under {s['quality']['poor_below']:g}) left out of training "
            "and out of the flags"
        )
    if "reference" in s:
        labels = s["reference"]["labels"]
        con.print(
            f"flagged by reference label ({s['reference']['source']}): "
            + ", ".join(f"{name} {v['flagged']:,} of {v['beats']:,}" for name, v in labels.items())
        )
    _print_aami(con, s)
    _print_training(con, s)
    con.print("seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in s["seconds"].items()))


@app.command(cls=_Command)
def ecg(
    input: Annotated[Path, typer.Argument(help=ONE_ECG + DATASET_INPUT + ".")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory for every output.")],
    device: DeviceOpt = "auto",
    channel: EcgChannelOpt = None,
    sampling_rate: Annotated[
        float | None, typer.Option(help="Sampling rate in Hz, when the file does not say.")
    ] = None,
    epochs: EpochsOpt = ECG.epochs,
    max_epochs: MaxEpochsOpt = ECG.max_epochs,
    batch_size: BatchOpt = ECG.batch_size,
    lr: LrOpt = ECG.lr,
    latent: Annotated[int, typer.Option(help="Latent dimensions of the VAE.", min=1, max=64)] = ECG.latent,
    ensemble: EnsembleOpt = ECG.ensemble,
    mode: Annotated[
        SegmentMode,
        typer.Option(
            help="centered (the default here): a fixed window around each R peak, 0.25 s before to 0.45 s after, "
            "so a premature beat is cut like any other; seed (the default of 'beats', the notebook's matrix): "
            "peak to peak, zero-padded."
        ),
    ] = (SegmentMode[ECG_MODE]),
    width: Annotated[int, typer.Option(help="Samples per beat row (a power of two).", min=8)] = BEAT_WIDTH,
    seed: SeedOpt = ECG.seed,
    percentile: PercentileOpt = ECG.percentile,
    reference: Annotated[
        Path | None,
        typer.Option(
            help="Labelled reference beats, to see which labels get flagged: a WFDB annotation file (e.g. "
            "mitdb/100.atr) or a CSV/Parquet with a 'sample' or 'time_s' column and a 'symbol' column, such as "
            "simulate's NAME.truth.csv."
        ),
    ] = None,
    scorer: ScorerOpt = None,
    neighbours: NeighboursOpt = None,
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    min_quality: MinQualityOpt = None,
    resume: ResumeOpt = False,
    tensorboard: TensorboardOpt = None,
    bf16: Bf16Opt = False,
    threads: ThreadsOpt = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    devices: DevicesOpt = None,
) -> None:
    """Find the heartbeats of an ECG, train a convolutional VAE on them, score and plot every beat.

    Given a folder, a glob or a list of recordings, trains one model per recording, each in its
    own directory under --out (on a Dask cluster), with index.parquet and summary.json;
    --resume then also skips the recordings already complete.
    """
    settings = LearnSettings(
        threads=threads,
        epochs=epochs,
        max_epochs=max_epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        latent=latent,
        ensemble=ensemble,
        percentile=percentile,
        scorer=None if scorer is None else scorer.value,
        neighbours=neighbours,
        resume=resume,
        bf16=bf16,
        tensorboard=None if tensorboard is None else str(tensorboard),
    )
    if is_dataset(input):
        options = {
            "settings": settings,
            "channel": _maybe_int(channel),
            "sampling_rate": sampling_rate,
            "mode": mode.value,
            "width": width,
            "nan": nan.value,
            "encoding": encoding,
            "min_quality": min_quality,
        }
        engine = _engine(workers, scheduler, devices, device)
        _run_dataset_cli("ecg", input, out, options, engine, reference, resume)
        return
    _single_only(workers=workers, scheduler=scheduler, devices=devices)
    con = _console()
    bar = "training" if ensemble == 1 else f"training {ensemble} members"
    with _epoch_bar(con, settings.epoch_limit, bar, exact=epochs is not None) as update:
        result = run_ecg(
            input,
            out,
            settings=settings,
            channel=_maybe_int(channel),
            sampling_rate=sampling_rate,
            device=device,
            mode=mode.value,
            width=width,
            reference=reference,
            nan=nan.value,
            encoding=encoding,
            progress=con.print,
            epoch_progress=update,
            min_quality=min_quality,
        )
    _print_ecg(con, result.summary)
    _print_outputs(con, result, ECG_FIGURES)


def _print_aami(con: Console, s: dict[str, Any]) -> None:
    aami = (s.get("reference") or {}).get("aami") or {}
    if aami:
        con.print(
            "flag rate by AAMI class: "
            + ", ".join(
                f"{k} {100 * v['flag_rate']:.1f} % ({v['flagged']:,} of {v['beats']:,})" for k, v in aami.items()
            )
        )


ModelOpt = Annotated[
    Path,
    typer.Option(
        "--model",
        "-m",
        help="The model: a run directory of 'ecg' or 'train' (its model.pt), or a model.pt file.",
    ),
]


@app.command(cls=_Command)
def score(
    input: Annotated[
        Path,
        typer.Argument(
            help=ONE_ECG + DATASET_INPUT + "; with a model from 'devicepipe series', a load series (CSV or Parquet)."
        ),
    ],
    model: ModelOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory for every output.")],
    device: DeviceOpt = "auto",
    channel: EcgChannelOpt = None,
    time_column: Annotated[
        str | None,
        typer.Option(
            help="With a load-series model: the timestamp column (default: the first column of times, as "
            "series finds it)."
        ),
    ] = None,
    time_format: TimeFormatOpt = None,
    sampling_rate: Annotated[
        float | None, typer.Option(help="Sampling rate in Hz, when the file does not say.")
    ] = None,
    reference: Annotated[
        Path | None,
        typer.Option(
            help="Labelled reference beats, to see the flag rate per label and AAMI class: a WFDB annotation "
            "file (e.g. mitdb/100.atr) or a table with 'sample'/'time_s' and 'symbol' columns; for many "
            "recordings an extension (atr)."
        ),
    ] = None,
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="For many recordings: skip those already scored.")] = False,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    devices: DevicesOpt = None,
) -> None:
    """Score the beats of new recordings with a model trained earlier, against its own threshold.

    The beats are found and cut as the model's were, standardised by each recording's own
    beats, and each gets a score, a flag and a tail probability (the share of the model's
    training beats that scored as high). A model trained on a GPU scores on a CPU and the reverse.
    With a model from 'devicepipe series', the windows (days) of a new period of a load series
    are scored the same way, scaled as the model's training series was (-c names its column).
    """
    many = is_dataset(input)
    named = model.resolve() if model.exists() else model
    fitted = load_model(named, "cpu" if many else device)  # a bad model: one line, before any cluster starts
    if model_input(fitted) == "load-windows":
        _score_series(input, fitted, out, device, channel, time_column, time_format, nan, encoding,
                      sampling_rate=sampling_rate, reference=reference, resume=resume, workers=workers,
                      scheduler=scheduler, devices=devices)  # fmt: skip
        return
    if time_column is not None or time_format is not None:
        raise DevicepipeError("--time-column and --time-format are for a model from 'devicepipe series'.")
    options = {
        "channel": _maybe_int(channel),
        "sampling_rate": sampling_rate,
        "nan": nan.value,
        "encoding": encoding,
    }
    if many:
        engine = _engine(workers, scheduler, devices, device)
        _run_dataset_cli("score", input, out, {"model": str(named), **options}, engine, reference, resume)
        return
    _single_only(workers=workers, scheduler=scheduler, devices=devices)
    if resume:
        raise DevicepipeError("--resume is for many recordings; scoring one recording starts afresh.")
    con = _console()
    result = run_score(input, out, model=fitted, device=device, reference=reference, progress=con.print, **options)
    s = result.summary
    c = s["counts"]
    con.print(
        f"{c['beats_found']:,} beats found, {c['beats_kept']:,} scored, {c['flagged']:,} flagged as anomalous "
        f"({100 * s['flag_rate']:.2f} %; the model's threshold {s['threshold']:.4g}, "
        f"trained on {s['model']['training_beats']:,} beats)"
    )
    if "reference" in s:
        labels = s["reference"]["labels"]
        con.print(
            f"flagged by reference label ({s['reference']['source']}): "
            + ", ".join(f"{name} {v['flagged']:,} of {v['beats']:,}" for name, v in labels.items())
        )
    _print_aami(con, s)
    _print_outputs(con, result, ["scores.png", "extremes.png", "latent.png"])


def _score_series(
    input: Path,
    model: BeatAnomalyDetector,
    out: Path,
    device: str,
    column: str | None,
    time_column: str | None,
    time_format: str | None,
    nan: NanPolicy,
    encoding: str | None,
    **ecg_only: Any,
) -> None:
    """``score`` with a model of load-series windows: one series, scored and printed."""
    given = [f"--{name.replace('_', '-')}" for name, value in ecg_only.items() if value not in (None, False)]
    if given:
        raise DevicepipeError(f"{given[0]} is not for a load-series model (from 'devicepipe series'); drop it.")
    if is_dataset(input):
        raise DevicepipeError("a load-series model scores one series at a time; give one CSV or Parquet file.")
    con = _console()
    result = run_score_series(
        input, out, model=model, column=_maybe_int(column), time_column=_maybe_int(time_column),
        time_format=time_format, device=device, nan=nan.value, encoding=encoding, progress=con.print,
    )  # fmt: skip
    s = result.summary
    w = s["windows"]
    con.print(
        f"{w['used']:,} windows of {s['window']} scored, {len(s['flagged']):,} flagged as anomalous "
        f"({100 * s['flag_rate']:.2f} %; the model's threshold {s['threshold']:.4g}, trained on "
        f"{s['model']['training_windows']:,} windows)"
        + (": " + ", ".join(f["start"][:10] for f in s["flagged"][:8]) if s["flagged"] else "")
    )
    _print_outputs(con, result, ["days.png", "extremes.png", "scores.png", "latent.png"])


@app.command(cls=_Command)
def train(
    input: Annotated[
        Path,
        typer.Argument(
            help="The recordings: a folder, a quoted glob or a .txt list of ECGs (CSV, Parquet, NPY, EDF/BDF, "
            "WFDB), or the --out directory of a 'beats' run on many recordings (its R peaks are reused)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Model directory: model.pt, report.html, figures.")],
    device: DeviceOpt = "auto",
    channel: EcgChannelOpt = None,
    sampling_rate: Annotated[float | None, typer.Option(help="Sampling rate in Hz, for files that do not say.")] = None,
    epochs: EpochsOpt = ECG.epochs,
    max_epochs: MaxEpochsOpt = ECG.max_epochs,
    batch_size: BatchOpt = ECG.batch_size,
    lr: LrOpt = ECG.lr,
    latent: Annotated[int, typer.Option(help="Latent dimensions of the VAE.", min=1, max=64)] = ECG.latent,
    ensemble: EnsembleOpt = ECG.ensemble,
    mode: Annotated[
        SegmentMode,
        typer.Option(help="centered: 0.25 s before to 0.45 s after each R peak; seed: peak to peak."),
    ] = (SegmentMode[ECG_MODE]),
    width: Annotated[int, typer.Option(help="Samples per beat row (a power of two).", min=8)] = BEAT_WIDTH,
    seed: SeedOpt = ECG.seed,
    percentile: PercentileOpt = ECG.percentile,
    scorer: ScorerOpt = None,
    neighbours: NeighboursOpt = None,
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    min_quality: MinQualityOpt = None,
    resume: ResumeOpt = False,
    bf16: Bf16Opt = False,
    threads: ThreadsOpt = None,
    memory_budget: Annotated[
        str | None,
        typer.Option(
            help="Device memory for the beats, e.g. 8GB; beyond it they stay in host memory and go to the "
            "device a batch at a time (same result). Default: a quarter of the device's free memory."
        ),
    ] = None,
) -> None:
    """Train one model of normal beats on many recordings, for 'devicepipe score' to apply to any other.

    Each recording's beats are standardised on their own, then all train one VAE. On several
    devices: torchrun --nproc-per-node N -m devicepipe train ... (DistributedDataParallel: NCCL
    on CUDA, one GPU per process; gloo on the CPU); rank 0 writes the model.
    """
    settings = LearnSettings(
        threads=threads,
        epochs=epochs,
        max_epochs=max_epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        latent=latent,
        ensemble=ensemble,
        percentile=percentile,
        scorer=None if scorer is None else scorer.value,
        neighbours=neighbours,
        resume=resume,
        bf16=bf16,
    )
    joined = start_distributed(device)
    rank, world = distributed()
    con = _console() if rank == 0 else Console(file=io.StringIO())
    if joined is not None:
        con.print(f"{world} processes (torchrun), this one on {joined}")
    bar = "training" if ensemble == 1 else f"training {ensemble} members"
    try:
        with _epoch_bar(con, settings.epoch_limit, bar, exact=epochs is not None) as update:
            result = run_train(
                input,
                out,
                settings=settings,
                channel=_maybe_int(channel),
                sampling_rate=sampling_rate,
                device=joined or device,
                mode=mode.value,
                width=width,
                nan=nan.value,
                encoding=encoding,
                min_quality=min_quality,
                progress=con.print,
                epoch_progress=update,
                memory_budget=None if memory_budget is None else parse_bytes(memory_budget),
            )
    finally:
        if joined is not None:
            torch.distributed.destroy_process_group()
    if rank != 0:
        return
    s = result.summary
    r = s["recordings"]
    con.print(
        f"{s['counts']['beats']:,} beats of {r['used']:,} recordings trained one model"
        + (
            f"; {len(r['skipped'])} left out, the first: {r['skipped'][0]['path']}: {r['skipped'][0]['error']}"
            if r["skipped"]
            else ""
        )
    )
    if "quality" in s:
        q = s["quality"]
        con.print(f"{q['left_out_of_training']:,} beats under --min-quality {q['min_quality']:g} left out of training")
    _print_training(con, s)
    _print_outputs(con, result, ["training.png", "scores.png", "latent.png"])
    con.print(f"score a recording with it: devicepipe score RECORDING --model {result.out} --out DIR")


@app.command(cls=_Command)
def series(
    input: Annotated[Path, typer.Argument(help="A time-indexed load series: CSV or Parquet.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory for every output.")],
    column: Annotated[
        str | None, typer.Option("--column", "-c", help="The value column (default: the only one).")
    ] = None,
    time_column: Annotated[
        str | None,
        typer.Option(
            help="The timestamp column (default: the first column of times, else of text named as times: "
            "Datetime, timestamp, date)."
        ),
    ] = None,
    time_format: TimeFormatOpt = None,
    window: Annotated[str, typer.Option(help="Window length: 1d (days), 12h, 1w (weeks) ...")] = SERIES_WINDOW,
    pointwise: Annotated[
        bool, typer.Option("--pointwise", help="The notebook's per-sample autoencoder (input size 1).")
    ] = False,
    device: DeviceOpt = "auto",
    epochs: EpochsOpt = SERIES.epochs,
    max_epochs: MaxEpochsOpt = SERIES.max_epochs,
    batch_size: BatchOpt = SERIES.batch_size,
    lr: LrOpt = SERIES.lr,
    hidden: Annotated[int, typer.Option(help="Hidden units.", min=1)] = SERIES_HIDDEN,
    latent: Annotated[int, typer.Option(help="Code size.", min=1, max=256)] = SERIES.latent,
    ensemble: EnsembleOpt = SERIES.ensemble,
    seed: SeedOpt = SERIES.seed,
    percentile: PercentileOpt = SERIES.percentile,
    scorer: ScorerOpt = None,
    neighbours: NeighboursOpt = None,
    nan: NanOpt = NanPolicy["error"],
    encoding: EncodingOpt = None,
    resume: ResumeOpt = False,
    tensorboard: TensorboardOpt = None,
    threads: ThreadsOpt = None,
) -> None:
    """Cut a load series into windows (days by default), train an MLP autoencoder, flag anomalous windows."""
    settings = SeriesLearnSettings(
        threads=threads,
        epochs=epochs,
        max_epochs=max_epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        latent=latent,
        ensemble=ensemble,
        percentile=percentile,
        scorer=None if scorer is None else scorer.value,
        neighbours=neighbours,
        resume=resume,
        tensorboard=None if tensorboard is None else str(tensorboard),
    )
    con = _console()
    with _epoch_bar(con, settings.epoch_limit, "training", exact=epochs is not None) as update:
        result = run_series(
            input,
            out,
            column=_maybe_int(column),
            time_column=_maybe_int(time_column),
            time_format=time_format,
            window=window,
            pointwise=pointwise,
            settings=settings,
            hidden=hidden,
            device=device,
            nan=nan.value,
            encoding=encoding,
            progress=con.print,
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
    _print_training(con, s)
    _print_outputs(con, result, ["days.png", "extremes.png", "latent.png", "training.png"])


@app.command(cls=_Command)
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the demo's files.")] = Path("demo-run"),
    device: DeviceOpt = "auto",
    epochs: EpochsOpt = ECG.epochs,
    threads: ThreadsOpt = None,
) -> None:
    """Simulate a 30-minute ECG with a few ectopic beats and run the whole ecg pipeline on it."""
    con = _console()
    with _epoch_bar(con, epochs or ECG.max_epochs, "training the VAE", exact=epochs is not None) as update:
        result = run_demo(out, device=device, epochs=epochs, threads=threads, progress=con.print, epoch_progress=update)
    _print_training(con, result.run.summary)
    con.print(
        f"{result.run.summary['counts']['flagged']} beats flagged as anomalous; {result.ectopic_flagged} of the "
        f"{result.n_ectopic} simulated ventricular ectopic beats are among them"
    )
    _print_outputs(con, result.run, ECG_FIGURES)


@app.command(cls=_Command)
def bench(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Directory for report.html, bench.json, bench.md and charts.")
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device", "-d", help="Comma-separated devices, e.g. cpu,cuda (default: cpu, and cuda if present)."
        ),
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Tiny sizes: checks that every benchmark runs.")] = False,
    only: Annotated[
        str | None,
        typer.Option(
            help=f"Comma-separated sections ({', '.join(SECTIONS)}) or stages (e.g. {', '.join(STAGES[:3])})."
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
    check_output_dir(out)
    devices = bench_devices(_split(device))
    wanted = check_only(_split(only)) if only else None
    with con.status("benchmarking ...") as status:
        result = run_benchmarks(
            devices,
            quick=quick,
            only=wanted,
            n_samples=samples,
            progress=lambda m: status.update(f"benchmarking: {m} ..."),
        )
        files = write_report(result, out)
    con.print(markdown(result))
    con.print(f"wrote {', '.join(str(p) for p in files.values())}")
    if "report.html" in files:
        con.print(f"open first: {files['report.html']}")


def _split(text: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def main() -> None:
    """Run the command on ``sys.argv`` (the console script's entry, :func:`devicepipe.__main__.main`,
    calls this once it has registered how the process ends)."""
    gc.freeze()  # what the imports made lives as long as the command: no collection traces it again
    app(prog_name="devicepipe")


if __name__ == "__main__":
    main()
