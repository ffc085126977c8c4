"""Synthetic recordings with ground truth: ECG with known R peaks, load series with known anomalous days.

The ECG is a sum of Gaussian P, Q, R, S and T waves per beat (the waveform family of
McSharry et al., "A dynamical model for generating synthetic electrocardiogram signals",
IEEE TBME 50(3), 2003, written in closed form rather than integrated), with heart-rate
variability (respiratory sinus arrhythmia, a 0.1 Hz Mayer wave and random jitter), baseline
wander, white noise, optional mains hum, optional premature ventricular beats (wide,
tall, no P wave, discordant T, with a compensatory pause) and inverted polarity. A
:class:`~devicepipe.simulate.rhythm.Rhythm` adds atrial premature beats (early, inverted P,
normal QRS), couplets, runs, bigeminy, trigeminy, interpolated beats, pauses and atrial
fibrillation (no P waves, fibrillatory waves of 4-8 Hz), with each beat's class and each event
in the truth. Each R wave
is centred on a whole sample, so the truth is exact. Beat timing is drawn on the host (a few
thousand numbers per hour); the waveform is evaluated on the device in one vectorised pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from devicepipe.core.device import resolve_device
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import positive
from devicepipe.io import write_csv, write_npy, write_parquet
from devicepipe.signal.runs import true_runs
from devicepipe.simulate.rhythm import Rhythm, plan_rhythm

__all__ = [
    "ECG_WAVES",
    "PVC_WAVES",
    "Rhythm",
    "SimulatedECG",
    "SimulatedLoad",
    "simulate_ecg",
    "simulate_load",
    "events_path",
    "simulation_path",
    "truth_path",
    "write_simulated_ecg",
    "write_simulated_load",
]

# (amplitude mV, offset from R in s at RR = 1 s, width sigma in s) for P, Q, R, S, T.
# Offsets of P and T scale with sqrt(RR) (Bazett), so fast beats have short PR and QT.
ECG_WAVES = np.array(
    [
        [0.15, -0.200, 0.025],  # P
        [-0.12, -0.032, 0.010],  # Q
        [1.20, 0.000, 0.011],  # R
        [-0.25, 0.034, 0.010],  # S
        [0.30, 0.260, 0.050],  # T
    ]
)
# Atrial premature beat: an inverted P wave closer to the QRS (an ectopic atrial focus), normal QRS and T.
APB_WAVES = ECG_WAVES.copy()
APB_WAVES[0] = [-0.12, -0.150, 0.022]
# Premature ventricular beat: no P wave, wide tall QRS, deep S, discordant (inverted) T.
PVC_WAVES = np.array(
    [
        [0.00, -0.200, 0.025],
        [0.00, -0.032, 0.010],
        [1.60, 0.000, 0.032],
        [-0.55, 0.075, 0.028],
        [-0.45, 0.300, 0.070],
    ]
)


@dataclass(frozen=True)
class SimulatedECG:
    """A synthetic ECG and its truth.

    Attributes
    ----------
    signal : Tensor of shape ``(time,)``, mV, on the requested device.
    sampling_rate : Hz.
    r_peaks : Tensor of shape ``(n_beats,)``, int64 sample index of each R peak (the wave's
        extremum: a maximum, or a minimum when ``inverted``), on the same device.
    symbols : NumPy array of shape ``(n_beats,)``: MIT-BIH's ``"N"`` normal, ``"A"`` atrial
        premature (AAMI class S), ``"V"`` ventricular ectopic.
    heart_rate_bpm : the mean heart rate asked for.
    inverted : whether the polarity is inverted (negative QRS).
    rhythms : NumPy array of shape ``(n_beats,)``: each beat's rhythm (``"N"`` sinus, ``"AFIB"``,
        ``"B"`` bigeminy, ``"T"`` trigeminy, ``"VT"`` a run of ventricular beats).
    events : ``(kind, first beat, last beat)`` of each couplet, run, bigeminy, trigeminy, pause
        (its last beat ends it), atrial fibrillation and interpolated beat, as beat indices.
    """

    signal: torch.Tensor
    sampling_rate: float
    r_peaks: torch.Tensor
    symbols: np.ndarray
    heart_rate_bpm: float
    inverted: bool
    rhythms: np.ndarray = field(default_factory=lambda: np.array([], dtype=str))
    events: tuple[tuple[str, int, int], ...] = ()

    @property
    def classes(self) -> np.ndarray:
        """Each beat's AAMI EC57 class: ``"N"``, ``"S"`` (the ``"A"`` beats) or ``"V"``."""
        return np.where(self.symbols == "A", "S", self.symbols)

    @property
    def duration_s(self) -> float:
        return self.signal.shape[-1] / self.sampling_rate


#: The shortest ECG simulated, in seconds: a few beats at the slowest heart rate (20 bpm).
MIN_ECG_S = 10.0


#: The most heart-rate variability the simulator takes (a share of the RR interval) and the most
#: noise, wander or mains interference (mV).
MOST_HRV = 0.5
MOST_MV = 1000.0


def _beat_times(
    duration_s: float, heart_rate_bpm: float, hrv: float, ectopic_rate: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """R-peak times (s) and symbols for a recording of ``duration_s`` seconds."""
    mean_rr = 60.0 / heart_rate_bpm
    n = int(duration_s / mean_rr * 1.3) + 8
    k = np.arange(n)
    t_approx = k * mean_rr
    rsa_phase, mayer_phase = rng.uniform(0, 2 * np.pi, 2)
    rr = mean_rr * (
        1
        + hrv * np.sin(2 * np.pi * 0.25 * t_approx + rsa_phase)
        + 0.6 * hrv * np.sin(2 * np.pi * 0.1 * t_approx + mayer_phase)
        + 0.5 * hrv * rng.standard_normal(n)
    )
    rr = np.clip(rr, 0.6 * mean_rr, 1.6 * mean_rr)
    symbols = np.full(n, "N")
    if ectopic_rate > 0:
        ectopic = rng.random(n) < ectopic_rate
        ectopic[:2] = False
        ectopic[1:] &= ~ectopic[:-1]  # no two in a row
        idx = np.flatnonzero(ectopic[:-1])
        # premature by 40 % (but coupled no sooner than 0.3 s, as real ventricular ectopics), then a
        # compensatory pause: the two intervals sum to two normal ones
        coupled = np.maximum(0.6 * rr[idx], np.minimum(0.3, 0.9 * rr[idx]))
        rr[idx + 1] += rr[idx] - coupled
        rr[idx] = coupled
        symbols[idx + 1] = "V"  # rr[i] is the interval leading to beat i + 1
    start = rng.uniform(0.3, 0.3 + mean_rr)
    times = start + np.concatenate([[0.0], np.cumsum(rr[:-1])])
    keep = times < duration_s + 1.0  # beats just past the end still shape the last samples
    return times[keep], symbols[keep]


def simulate_ecg(
    duration_s: float,
    sampling_rate: float = 250.0,
    *,
    heart_rate_bpm: float = 70.0,
    hrv: float = 0.05,
    noise_mV: float = 0.02,
    wander_mV: float = 0.15,
    powerline_mV: float = 0.0,
    powerline_hz: float = 50.0,
    ectopic_rate: float = 0.0,
    inverted: bool = False,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    rhythm: Rhythm | None = None,
) -> SimulatedECG:
    """Simulate an ECG with known R peaks.

    Parameters
    ----------
    duration_s : length in seconds.
    sampling_rate : Hz (125 to 1000 are typical).
    heart_rate_bpm : mean heart rate.
    hrv : relative amplitude of the heart-rate variability (0.05 = about 5 % of the RR interval).
    noise_mV : standard deviation of white measurement noise.
    wander_mV : amplitude of the baseline wander (three slow sinusoids, 0.05 to 0.5 Hz).
    powerline_mV, powerline_hz : mains interference.
    ectopic_rate : probability that a beat is a premature ventricular beat.
    inverted : flip the polarity (negative QRS).
    seed : the same seed gives the same recording (on the same device).
    rhythm : atrial premature beats, couplets, runs, bigeminy, pauses, atrial fibrillation, ...
        (see :class:`~devicepipe.simulate.rhythm.Rhythm`; its ``ectopic_rate`` where
        ``ectopic_rate`` is 0).

    Returns
    -------
    SimulatedECG with ``signal`` of shape ``(round(duration_s * sampling_rate),)`` in mV.
    """
    rhythm = replace(rhythm or Rhythm(), ectopic_rate=ectopic_rate or (rhythm.ectopic_rate if rhythm else 0.0))
    _check_ecg(duration_s, sampling_rate, heart_rate_bpm, rhythm.ectopic_rate)
    _check_waves(hrv, noise_mV, wander_mV, powerline_mV, powerline_hz)
    _check_rhythm(rhythm)
    dev = resolve_device(device)
    rng = np.random.default_rng(seed)
    fs = float(sampling_rate)
    n = int(round(duration_s * fs))
    if rhythm.patterned:
        plan = plan_rhythm(duration_s, heart_rate_bpm, hrv, rhythm, rng)
        times, symbols, rhythms, events = plan.times, plan.symbols, plan.rhythms, plan.events
    else:  # (the draws of the plain simulator, so that a seed gives the recording it always gave)
        times, symbols = _beat_times(duration_s, heart_rate_bpm, hrv, rhythm.ectopic_rate, rng)
        rhythms, events = np.full(times.size, "N"), []
    r_samples = np.rint(times * fs).astype(np.int64)
    rr = np.diff(np.concatenate([[r_samples[0] - fs * 60 / heart_rate_bpm], r_samples])) / fs

    r_t = torch.as_tensor(r_samples).to(dev)
    signal = _waves(n, fs, r_t, symbols, rr, rng, dtype, no_p=rhythms == "AFIB")
    if (rhythms == "AFIB").any():
        signal += _fibrillation(n, fs, times, rhythms, rng, signal)

    idx = torch.arange(n, device=dev)
    seconds = idx.to(dtype) / fs
    if wander_mV > 0:
        freqs = rng.uniform(0.05, 0.5, 3)
        phases = rng.uniform(0, 2 * np.pi, 3)
        weights = rng.dirichlet(np.ones(3))
        for f, p, w in zip(freqs, phases, weights, strict=True):
            signal += float(wander_mV * w) * torch.sin(2 * np.pi * float(f) * seconds + float(p))
    if powerline_mV > 0:
        signal += powerline_mV * torch.sin(2 * np.pi * powerline_hz * seconds)
    inside = r_samples < n
    r_t = _true_peaks(signal, r_t[torch.as_tensor(inside).to(dev)], fs)

    if noise_mV > 0:
        gen = torch.Generator().manual_seed(seed)  # CPU stream: the same noise on every device
        signal += noise_mV * torch.randn(n, generator=gen, dtype=dtype).to(dev)
    if inverted:
        signal = -signal

    n_in = int(inside.sum())  # (the beats are in time order: those inside come first)
    return SimulatedECG(
        signal=signal,
        sampling_rate=fs,
        r_peaks=r_t,
        symbols=symbols[inside],
        heart_rate_bpm=float(heart_rate_bpm),
        inverted=inverted,
        rhythms=rhythms[inside],
        events=tuple((kind, a, min(b, n_in - 1)) for kind, a, b in events if a < n_in),
    )


def _check_load(days: int, samples_per_day: int, n_anomalies: int) -> None:
    """A clear error for a load series :func:`simulate_load` cannot make."""
    if days < 21:
        raise DevicepipeError(f"simulate: days must be at least 21 (three weeks), got {days}.")
    if samples_per_day < 4:
        raise DevicepipeError(f"simulate: samples_per_day must be at least 4, got {samples_per_day}.")
    if not 0 <= n_anomalies <= days - 14:  # (two weeks of ordinary days at least)
        raise DevicepipeError(
            f"simulate: {{param}} must be within 0-{days - 14} for {days} days, got {n_anomalies}",
            fix=f"ask for at most {{n_anomalies={days - 14}}}, or more {{days}}.",
            param="n_anomalies",
            value=n_anomalies,
        )


def _check_rhythm(rhythm: Rhythm) -> None:
    for name in ("couplets", "runs", "pauses", "interpolated"):
        value = getattr(rhythm, name)
        if not (isinstance(value, (int, np.integer)) and value >= 0):
            raise DevicepipeError(f"simulate: {name} must be a whole number, 0 or more, got {value!r}.")
    shares = {name: getattr(rhythm, name) for name in ("bigeminy", "trigeminy", "afib", "vt")}
    if not all(0 <= v <= 1 for v in shares.values()) or sum(shares.values()) > 1:
        raise DevicepipeError(
            f"simulate: bigeminy, trigeminy, afib and vt are shares of the recording's time, each 0-1 and "
            f"together at most 1; got {shares}."
        )
    if rhythm.vt_bpm and not 100 <= rhythm.vt_bpm <= 250:
        raise DevicepipeError(
            f"simulate: a ventricular tachycardia of {rhythm.vt_bpm:g} bpm is out of range",
            fix="give {vt_bpm} within 100-250 bpm, or 0 to draw each episode's from 130-200.",
            param="vt_bpm",
            value=rhythm.vt_bpm,
        )
    if not 0 <= rhythm.atrial_rate < 0.5 or rhythm.ectopic_rate + rhythm.atrial_rate >= 0.5:
        raise DevicepipeError(
            f"simulate: atrial_rate must be within [0, 0.5) and, with ectopic_rate, under 0.5; got "
            f"{rhythm.atrial_rate} and {rhythm.ectopic_rate}."
        )


def _fibrillation(
    n: int, fs: float, times: np.ndarray, rhythms: np.ndarray, rng: np.random.Generator, like: torch.Tensor
) -> torch.Tensor:
    """Fibrillatory waves (three sinusoids of 4-8 Hz, 0.02-0.05 mV each) over every stretch of
    atrial fibrillation (from its first beat to its last), shape ``(n,)`` like ``like``."""
    seconds = torch.arange(n, device=like.device, dtype=like.dtype) / fs
    waves = torch.zeros_like(like)
    for f, a, p in zip(rng.uniform(4, 8, 3), rng.uniform(0.02, 0.05, 3), rng.uniform(0, 2 * np.pi, 3), strict=True):
        waves += float(a) * torch.sin(2 * np.pi * float(f) * seconds + float(p))
    afib = rhythms == "AFIB"
    mask = torch.zeros(n, dtype=torch.bool, device=like.device)
    for a, b in true_runs(afib):
        lo, hi = int(times[a - 1] * fs) if a else 0, min(int(times[b - 1] * fs), n)
        mask[lo:hi] = True
    return torch.where(mask, waves, 0.0)


def _check_amount(name: str, value: float, most: float, unit: str = "") -> None:
    """A clear error unless ``value`` is a finite number within ``[0, most]`` (a noise, wander or
    share the simulator scales its waves by: infinity or NaN had written a signal of them)."""
    if not (isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value) and 0 <= value <= most):
        raise DevicepipeError(
            f"simulate: {{param}} must be a finite number within 0-{most:g}{unit}, got {value!r}",
            fix=f"give {{{name}}} within 0-{most:g}{unit}.",
            param=name,
            value=value,
        )


def _check_waves(hrv: float, noise_mV: float, wander_mV: float, powerline_mV: float, powerline_hz: float) -> None:
    """The amounts the waves are scaled by (see :func:`simulate_ecg`): beyond half the RR interval,
    the variability would turn intervals back; beyond a thousand times a QRS's height, noise buries
    every beat: neither is a recording."""
    _check_amount("hrv", hrv, MOST_HRV)
    for name, amount in (("noise_mV", noise_mV), ("wander_mV", wander_mV), ("powerline_mV", powerline_mV)):
        _check_amount(name, amount, MOST_MV, " mV")
    positive(powerline_hz, "simulate", "powerline_hz")


def _check_ecg(duration_s: float, sampling_rate: float, heart_rate_bpm: float, ectopic_rate: float) -> None:
    positive(duration_s, "simulate", "duration_s")
    positive(sampling_rate, "simulate", "sampling_rate")
    positive(heart_rate_bpm, "simulate", "heart_rate_bpm")
    if duration_s < MIN_ECG_S:
        raise DevicepipeError(
            f"an ECG of {duration_s:g} s holds no whole beat",
            fix=f"simulate at least {{duration_s={MIN_ECG_S:g}s}}.",
            param="duration_s",
            value=duration_s,
        )
    if not 20 <= heart_rate_bpm <= 250:
        raise DevicepipeError(f"simulate: heart_rate_bpm must be within 20-250, got {heart_rate_bpm}.")
    if not 0 <= ectopic_rate < 0.5:
        raise DevicepipeError(f"simulate: ectopic_rate must be within [0, 0.5), got {ectopic_rate}.")


def _waves(
    n: int,
    fs: float,
    r_t: torch.Tensor,
    symbols: np.ndarray,
    rr: np.ndarray,
    rng: np.random.Generator,
    dtype: torch.dtype,
    no_p: np.ndarray | None = None,
) -> torch.Tensor:
    """The noise-free P, Q, R, S and T waves of every beat (R peaks at ``r_t``, samples; RR
    intervals ``rr``, s; ``symbols`` N, A or V; ``no_p``: beats without a P wave, those in
    atrial fibrillation), shape ``(n,)`` in mV on ``r_t``'s device."""
    dev = r_t.device
    # per-beat wave parameters, shape (n_beats, 5)
    waves = np.where((symbols == "V")[:, None, None], PVC_WAVES, ECG_WAVES)
    waves = np.where((symbols == "A")[:, None, None], APB_WAVES, waves)
    if no_p is not None and no_p.any():
        waves = waves.copy()
        waves[no_p, 0, 0] = 0.0
    amp = waves[:, :, 0] * (1 + 0.05 * rng.standard_normal((len(symbols), 1)))
    qt = np.sqrt(np.clip(rr, 0.3, 2.0))[:, None]
    offset = waves[:, :, 1] * np.where([True, False, False, False, True], qt, 1.0)
    width = waves[:, :, 2] * (1 + 0.03 * rng.standard_normal((len(symbols), 1)))
    amp_t, off_t, wid_t = (torch.as_tensor(a, dtype=dtype).to(dev) for a in (amp, offset, width))
    signal = torch.zeros(n, dtype=dtype, device=dev)
    for w in range(5):
        # each wave is evaluated only over its own support (+-5 sigma) and added in place
        half = int(np.ceil(5 * width[:, w].max() * fs))
        centre = r_t + torch.as_tensor(np.rint(offset[:, w] * fs).astype(np.int64)).to(dev)
        pos = centre[:, None] + torch.arange(-half, half + 1, device=dev)  # (n_beats, support)
        t = (pos - r_t[:, None]).to(dtype) / fs  # seconds from each beat's R peak
        z = (t - off_t[:, w, None]) / wid_t[:, w, None]
        values = amp_t[:, w, None] * torch.exp(-0.5 * z * z)
        inside = (pos >= 0) & (pos < n)
        signal.index_add_(0, pos.clamp(0, n - 1).reshape(-1), torch.where(inside, values, 0.0).reshape(-1))
    return signal


def _true_peaks(signal: torch.Tensor, r_t: torch.Tensor, fs: float) -> torch.Tensor:
    """Each beat's actual maximum within 20 ms of its R wave's centre ``r_t`` on the noise-free
    ``signal``: a neighbouring wave (the deep S of a ventricular beat) can pull the composite peak
    a millisecond off the R wave's centre."""
    n = signal.shape[0]
    half = max(1, int(np.ceil(0.02 * fs)))
    window = r_t[:, None] + torch.arange(-half, half + 1, device=r_t.device)
    near = torch.where((window >= 0) & (window < n), signal[window.clamp(0, n - 1)], -torch.inf)
    return window.gather(1, near.argmax(1, keepdim=True)).squeeze(1)


@dataclass(frozen=True)
class SimulatedLoad:
    """A synthetic electricity load series and its anomalous days.

    Attributes
    ----------
    values : Tensor of shape ``(time,)``, MW, on the requested device.
    timestamps : NumPy ``datetime64[ns]`` array of shape ``(time,)``, regular.
    samples_per_day : samples in one day (24 for hourly data).
    anomalous_days : NumPy ``datetime64[D]`` array, sorted.
    anomaly_kinds : the kind of each anomalous day: ``"outage"``, ``"holiday"``, ``"spike"``
        or ``"stuck"`` (a sensor repeating one value).
    """

    values: torch.Tensor
    timestamps: np.ndarray
    samples_per_day: int
    anomalous_days: np.ndarray
    anomaly_kinds: tuple[str, ...]


def simulate_load(
    days: int = 365,
    *,
    samples_per_day: int = 24,
    start: str = "2020-01-01",
    base_mw: float = 15000.0,
    noise: float = 0.02,
    n_anomalies: int = 6,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> SimulatedLoad:
    """Simulate a load series with daily, weekly and yearly cycles and a few anomalous days.

    The daily profile has a morning and an evening peak; weekends run about 12 % lower;
    winter and summer run higher than spring and autumn; ``noise`` is the relative standard
    deviation of multiplicative noise. ``n_anomalies`` days (not the first or last week) are
    replaced by an outage, a holiday-like flat weekday, an afternoon spike or a stuck sensor.

    Returns
    -------
    SimulatedLoad with ``values`` of shape ``(days * samples_per_day,)`` in MW.
    """
    _check_load(days, samples_per_day, n_anomalies)
    _check_amount("noise", noise, 1.0)  # (a share of the load: at 1, as large as the load itself)
    dev = resolve_device(device)
    rng = np.random.default_rng(seed)
    try:
        t0 = np.datetime64(start, "ns")
    except ValueError:
        raise DevicepipeError(f"simulate: start {start!r} is not a date; use YYYY-MM-DD.") from None
    n = days * samples_per_day
    step_ns = 86_400_000_000_000 // samples_per_day
    timestamps = t0 + np.arange(n, dtype=np.int64) * np.timedelta64(step_ns, "ns")
    hour = (np.arange(n) % samples_per_day) * 24.0 / samples_per_day
    day_index = np.arange(n) // samples_per_day
    weekday = (timestamps.astype("datetime64[D]").view(np.int64) + 3) % 7  # 0 = Monday
    day_of_year = (timestamps - timestamps.astype("datetime64[Y]")).astype("timedelta64[D]").astype(float)

    daily = 0.78 + 0.16 * np.exp(-0.5 * ((hour - 8.5) / 2.0) ** 2) + 0.24 * np.exp(-0.5 * ((hour - 19.0) / 2.5) ** 2)
    weekly = np.where(weekday >= 5, 0.88, 1.0)
    seasonal = 1.0 + 0.12 * np.cos(2 * np.pi * day_of_year / 365.25) ** 2
    load = base_mw * daily * weekly * seasonal * (1 + noise * rng.standard_normal(n))

    kinds_all = ("outage", "holiday", "spike", "stuck")
    chosen = np.sort(rng.choice(np.arange(7, days - 7), size=n_anomalies, replace=False))
    kinds = tuple(kinds_all[i % len(kinds_all)] for i in rng.permutation(n_anomalies))
    for day, kind in zip(chosen, kinds, strict=True):
        sl = day_index == day
        if kind == "outage":
            lo = int(rng.integers(6, 14) * samples_per_day / 24)
            hours = (hour >= lo * 24 / samples_per_day) & (hour < lo * 24 / samples_per_day + 6)
            load[sl & hours] *= 0.35
        elif kind == "holiday":
            load[sl] = load[sl].mean() * 0.86 * (1 + noise * rng.standard_normal(int(sl.sum())))
        elif kind == "spike":
            load[sl & (hour >= 12) & (hour < 17)] *= 1.45
        else:
            load[sl] = load[np.flatnonzero(sl)[0]]
    values = torch.as_tensor(load, dtype=dtype).to(dev)
    return SimulatedLoad(
        values=values,
        timestamps=timestamps,
        samples_per_day=samples_per_day,
        anomalous_days=(t0.astype("datetime64[D]") + chosen),
        anomaly_kinds=kinds,
    )


def truth_path(path: str | Path) -> Path:
    """Where the truth of a simulated recording written to ``path`` goes: ``NAME.truth.csv`` beside it."""
    path = Path(path)
    return path.with_name(path.stem + ".truth.csv")


def events_path(path: str | Path) -> Path:
    """Where the events of a simulated ECG written to ``path`` go: ``NAME.events.csv`` beside it."""
    path = Path(path)
    return path.with_name(path.stem + ".events.csv")


def simulation_path(path: str | Path, kind: str) -> Path:
    """``path`` as a Path when its suffix suits a simulated ``kind`` (``"ecg"`` or ``"load"``), else a clear error."""
    path = Path(path)
    if kind == "ecg" and path.suffix.lower() not in (".csv", ".parquet", ".npy"):
        raise DevicepipeError(
            f"cannot write {path.name}", fix="use a .csv, .parquet or .npy file name for {out}.", param="out"
        )
    if kind == "load" and path.suffix.lower() not in (".csv", ".parquet"):
        problem = f"cannot write {path.name}: a load series has timestamps"
        raise DevicepipeError(problem, fix="use a .csv or .parquet file name for {out}.", param="out")
    return path


def write_simulated_ecg(sim: SimulatedECG, path: str | Path) -> tuple[Path, Path]:
    """Write the signal to ``path`` (``.csv``, ``.parquet`` with its rate, or ``.npy``) and the truth
    (R-peak sample, time in s, MIT-BIH symbol, AAMI class, rhythm) to :func:`truth_path`; where
    the rhythm has events, those (kind, first and last beat, their times) to :func:`events_path`.
    Returns the signal's and the truth's paths."""
    path = simulation_path(path, "ecg")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        write_csv({"ecg": sim.signal}, path)
    elif suffix == ".parquet":
        write_parquet({"ecg": sim.signal}, path, sampling_rate=sim.sampling_rate)
    else:
        write_npy(sim.signal, path)
    peaks = sim.r_peaks.cpu().numpy()
    seconds = peaks / sim.sampling_rate
    truth = {"sample": peaks, "time_s": seconds, "symbol": np.asarray(sim.symbols), "class": sim.classes}
    if sim.rhythms.size:
        truth["rhythm"] = np.asarray(sim.rhythms)
    if sim.events:
        kinds, first, last = (np.array(column) for column in zip(*sim.events, strict=True))
        table = {"kind": kinds, "first_beat": first, "last_beat": last, "start_s": seconds[first],
                 "end_s": seconds[last], "beats": last - first + 1}  # fmt: skip
        write_csv(table, events_path(path))
    return path, write_csv(truth, truth_path(path))


def write_simulated_load(sim: SimulatedLoad, path: str | Path) -> tuple[Path, Path]:
    """Write ``Datetime`` and ``load_MW`` columns to ``path`` (``.csv`` or ``.parquet``) and the
    anomalous days and their kinds to :func:`truth_path`; returns both paths."""
    path = simulation_path(path, "load")
    suffix = path.suffix.lower()
    seconds = sim.timestamps.astype("datetime64[s]")  # written as 2020-01-01 00:00:00, not to the nanosecond
    table = {"Datetime": seconds if (seconds == sim.timestamps).all() else sim.timestamps, "load_MW": sim.values}
    (write_csv if suffix == ".csv" else write_parquet)(table, path)
    days = {"day": sim.anomalous_days.astype(str), "kind": list(sim.anomaly_kinds)}
    return path, write_csv(days, truth_path(path))
