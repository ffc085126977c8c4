"""``devicepipe simulate ecg|load``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from devicepipe.cli.application import (
    Command,
    simulate_app,
)
from devicepipe.cli.printing import (
    console,
    warn,
)
from devicepipe.core.units import format_duration, parse_duration
from devicepipe.simulate import (
    Rhythm,
    SimulatedECG,
    events_path,
    simulate_ecg,
    simulate_load,
    simulation_path,
    write_simulated_ecg,
    write_simulated_load,
)


@simulate_app.command("ecg", cls=Command, short_help="An ECG with known R peaks and ectopic beats.")
def simulate_ecg_cmd(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output file: .csv, .parquet or .npy. The truth goes to NAME.truth.csv.")
    ],
    duration: Annotated[str, typer.Option(help="Length, e.g. 30min, 24h, 90s.", metavar="DURATION")] = "30min",
    sampling_rate: Annotated[float, typer.Option(help="Sampling rate in Hz.", min=50, max=10000, metavar="HZ")] = 250.0,
    heart_rate: Annotated[
        float, typer.Option(help="Mean heart rate in beats per minute.", min=20, max=250, metavar="BPM")
    ] = 70.0,
    noise: Annotated[float, typer.Option(help="White noise standard deviation in mV.", min=0, metavar="MV")] = 0.02,
    wander: Annotated[float, typer.Option(help="Baseline wander amplitude in mV.", min=0, metavar="MV")] = 0.15,
    ectopic_rate: Annotated[
        float, typer.Option(help="Share of premature ventricular beats.", min=0, max=0.49, metavar="SHARE")
    ] = 0.0,
    atrial_rate: Annotated[
        float, typer.Option(help="Share of atrial premature beats.", min=0, max=0.49, metavar="SHARE")
    ] = 0.0,
    couplets: Annotated[int, typer.Option(help="Pairs of ventricular beats.", min=0, metavar="N")] = 0,
    runs: Annotated[int, typer.Option(help="Runs of 3-8 ventricular beats.", min=0, metavar="N")] = 0,
    pauses: Annotated[int, typer.Option(help="Sinus pauses of 2.2-3.5 s.", min=0, metavar="N")] = 0,
    interpolated: Annotated[int, typer.Option(help="Ventricular beats without a pause.", min=0, metavar="N")] = 0,
    bigeminy: Annotated[
        float, typer.Option(help="Share of the time in bigeminy.", min=0, max=1, metavar="SHARE")
    ] = 0.0,
    trigeminy: Annotated[
        float, typer.Option(help="Share of the time in trigeminy.", min=0, max=1, metavar="SHARE")
    ] = 0.0,
    afib: Annotated[
        float, typer.Option(help="Share of the time in atrial fibrillation.", min=0, max=1, metavar="SHARE")
    ] = 0.0,
    vt: Annotated[
        float,
        typer.Option(
            help="Share of the time in ventricular tachycardia (episodes of 15-60 s; 1: the whole recording).",
            min=0,
            max=1,
            metavar="SHARE",
        ),
    ] = 0.0,
    vt_rate: Annotated[
        float,
        typer.Option(
            help="Rate of ventricular tachycardia in bpm (0: drawn from 130-200 per episode).",
            min=0,
            max=250,
            metavar="BPM",
        ),
    ] = 0.0,
    inverted: Annotated[bool, typer.Option("--inverted", help="Invert the polarity (negative QRS).")] = False,
    seed: Annotated[int, typer.Option(help="Random seed; the same seed gives the same recording.", metavar="N")] = 0,
) -> None:
    """Simulate an ECG with known R peaks (Gaussian P-QRS-T waves, heart-rate variability, wander,
    noise), ectopic beats and their patterns; each beat's class and each event go to the truth."""
    rhythm = Rhythm(
        atrial_rate=atrial_rate, couplets=couplets, runs=runs, pauses=pauses, interpolated=interpolated,
        bigeminy=bigeminy, trigeminy=trigeminy, afib=afib, vt=vt, vt_bpm=vt_rate,
    )  # fmt: skip
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
        rhythm=rhythm,
    )
    _, truth = write_simulated_ecg(sim, out)
    con = console()
    n_v = int((sim.symbols == "V").sum())
    con.print(
        f"wrote {out} ({sim.signal.numel():,} samples at {sampling_rate:g} Hz, {format_duration(sim.duration_s)}) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    n_s = int((sim.classes == "S").sum())
    atrial = f", {n_s} atrial premature" if n_s else ""
    con.print(f"truth: {truth} ({sim.r_peaks.numel():,} beats, {n_v} ventricular ectopic{atrial})")
    _say_events(con, sim, out, rhythm)


def _say_events(con: Console, sim: SimulatedECG, out: Path, rhythm: Rhythm) -> None:
    """The events written, by kind, and a warning for each kind asked for by number of which
    fewer fit in the recording (each needs room around it)."""
    made = {kind: sum(k == kind for k, _, _ in sim.events) for kind in sorted({k for k, _, _ in sim.events})}
    if made:
        con.print(f"events: {events_path(out)} ({', '.join(f'{n} {kind}' for kind, n in made.items())})")
    for kind, n in rhythm.counted.items():
        if made.get(kind, 0) < n:
            warn(
                con,
                f"{made.get(kind, 0)} of the {n:,} {kind} events asked for fit in {format_duration(sim.duration_s)}; "
                "ask for fewer, or a longer --duration",
            )


@simulate_app.command("load", cls=Command, short_help="A load series with anomalous days of known kind.")
def simulate_load_cmd(
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Output file: .csv or .parquet (Datetime and load_MW columns). Anomalous days go to NAME.truth.csv.",
        ),
    ],
    days: Annotated[int, typer.Option(help="Number of days.", min=21, metavar="N")] = 365,
    samples_per_day: Annotated[int, typer.Option(help="Samples per day (24 = hourly).", min=4, metavar="N")] = 24,
    start: Annotated[str, typer.Option(help="First day, YYYY-MM-DD.", metavar="DATE")] = "2020-01-01",
    anomalies: Annotated[int, typer.Option(help="Number of anomalous days.", min=0, metavar="N")] = 6,
    noise: Annotated[float, typer.Option(help="Relative noise (0.02 = 2 %).", min=0, metavar="SHARE")] = 0.02,
    seed: Annotated[int, typer.Option(help="Random seed.", metavar="N")] = 0,
) -> None:
    """Simulate a load series (daily, weekly, yearly cycles) with a few anomalous days of known kind."""
    simulation_path(out, "load")
    sim = simulate_load(
        days, samples_per_day=samples_per_day, start=start, n_anomalies=anomalies, noise=noise, seed=seed
    )
    _, truth = write_simulated_load(sim, out)
    con = console()
    con.print(f"wrote {out} ({sim.values.numel():,} samples, {days} days from {start})")
    con.print(f"truth: {truth} ({len(sim.anomaly_kinds)} anomalous days)")
