"""Pipelines: the stages of one recording in order, on one device, timed, their outputs written.

Each ``run_*`` reads like the data flow: read -> segment -> (scale -> learn -> score) ->
copy back -> write. The stages live in their own modules (:mod:`~devicepipe.io`,
:mod:`~devicepipe.ecg`, :mod:`~devicepipe.windows`, :mod:`~devicepipe.scale`,
:mod:`~devicepipe.learn`, :mod:`~devicepipe.score`, :mod:`~devicepipe.outputs`). These
functions never print; progress goes to optional callbacks. ``"auto"`` devices are resolved
here, once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.device import resolve_device
from devicepipe.ecg import (
    EDGE_S,
    MATCH_TOLERANCE_S,
    Beats,
    BeatScore,
    ecg_peaks,
    ecg_segment,
    evaluate_beats,
    label_beats,
)
from devicepipe.errors import DevicepipeError
from devicepipe.interop import TransferLedger
from devicepipe.io import (
    Recording,
    ReferenceBeats,
    check_output_dir,
    read_reference,
    read_series,
    staged_dir,
    sweep_leftovers,
    write_npy,
)
from devicepipe.io.read import declares_sampling_rate, input_fingerprint
from devicepipe.learn import (
    LearnSettings,
    SeriesLearnSettings,
    check_before_start,
    convergence_warning,
    score_rows,
    train_models,
)
from devicepipe.models import LightVAE, LightVAEConfig, MLPAutoencoder, MLPAutoencoderConfig
from devicepipe.outputs import (
    beats_figures,
    ecg_figures,
    heart_rate_summary,
    input_summary,
    series_figures,
    write_beat_files,
    write_scores,
    write_summary,
)
from devicepipe.report import MAX_FLAGGED_ROWS, REPORT_NAME, FlaggedRows, write_report
from devicepipe.scale import MinMaxScaler, StandardScaler
from devicepipe.score import Scores, group_scores, latent_grid, reconstruct
from devicepipe.signal.resample import resample_rows
from devicepipe.simulate import simulate_ecg, write_simulated_ecg
from devicepipe.threads import ThreadChoice, choose_threads, using_threads
from devicepipe.timing import StageTimer
from devicepipe.units import parse_duration
from devicepipe.windows import make_windows

__all__ = [
    "BeatsResult",
    "DemoResult",
    "LearnResult",
    "LearnSettings",
    "SeriesLearnSettings",
    "StageTimer",
    "rate_warnings",
    "run_beats",
    "run_demo",
    "run_ecg",
    "run_series",
]

Progress = Callable[[str], None]
EpochProgress = Callable[[int, float, float], None]

MIN_BEATS_TO_TRAIN = 20
MIN_WINDOWS_TO_TRAIN = 10

# Defaults of the pipelines (the command line takes its defaults from these too)
PEAK_METHOD = "ricker"  # the accurate detector; "seed" is the notebook's recipe
BEATS_MODE = "seed"  # run_beats: the notebook's peak-to-peak beats
ECG_MODE = "centered"  # run_ecg: windows around each R peak, which keep premature beats
BEAT_WIDTH = 256  # samples per beat row given to the VAE (a power of two)
SERIES_WINDOW = "1d"  # run_series: days
SERIES_HIDDEN = 32  # hidden units of the MLP autoencoder (the notebook's)


@dataclass(frozen=True)
class BeatsResult:
    """What :func:`run_beats` found and wrote."""

    source: str
    device: torch.device
    sampling_rate: float
    n_samples: int
    channel: str
    peaks: np.ndarray  # int64 sample indices, shape (n_beats,)
    beats: Beats
    seconds: dict[str, float]
    files: dict[str, Path]
    score: BeatScore | None = None
    transfers: dict[str, Any] | None = None  # host-device copies counted (None when not counted)
    warnings: tuple[str, ...] = ()  # what looks wrong with the settings (see rate_warnings)

    @property
    def mean_heart_rate_bpm(self) -> float | None:
        return median_heart_rate(self.peaks, self.sampling_rate)


@dataclass(frozen=True)
class LearnResult:
    """What a learning pipeline wrote: the run directory, its summary, its files."""

    out: Path
    summary: dict[str, Any]
    files: dict[str, Path]


@dataclass(frozen=True)
class _Run:
    """One run in progress: where it writes, the device, its stage timer, its progress callback."""

    out: Path
    device: torch.device
    timer: StageTimer
    note: Progress

    def stage(self, name: str) -> Any:
        return self.timer.stage(name)


def _start(out: str | Path, device: str | torch.device, count_transfers: bool, progress: Progress | None) -> _Run:
    out = check_output_dir(out)
    dev = resolve_device(device)
    note = progress or (lambda _msg: None)
    removed = sweep_leftovers(out)  # of an earlier run into the same directory that was killed
    if removed:
        note(f"removed {len(removed)} file(s) an interrupted run left in {out}")
    ledger = TransferLedger() if count_transfers else None
    return _Run(out, dev, StageTimer(dev, ledger), note)


def _to_host(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Host (NumPy) copies of named tensors (inside a run's "transfer" stage)."""
    return {name: t.detach().cpu().numpy() for name, t in tensors.items()}


def _unknown_rate(source: str) -> DevicepipeError:
    problem = f"the sampling rate of {source} is unknown"
    return DevicepipeError(
        f"{problem}; pass sampling_rate=HZ (e.g. sampling_rate=250).",
        cli=f"{problem}; pass --sampling-rate HZ (e.g. --sampling-rate 250).",
    )


def _read_and_cut(
    run: _Run,
    source: Any,
    channel: str | int | None,
    sampling_rate: float | None,
    method: str,
    mode: str,
    nan: str,
    encoding: str | None,
) -> tuple[Recording, torch.Tensor, Beats]:
    """Read one ECG channel (the first by default) onto the run's device, find its beats, cut them;
    ``nan`` (the policy for non-finite samples) and ``encoding`` (a CSV's) as
    :func:`devicepipe.io.read_series` takes them."""
    if sampling_rate is None and declares_sampling_rate(source) is False:
        raise _unknown_rate(Path(source).name)  # said before a long read, not after
    with run.stage("read"):
        rec = read_series(
            source,
            0 if channel is None else channel,
            device=run.device,
            sampling_rate=sampling_rate,
            nan=nan,
            encoding=encoding,
        )
    if rec.sampling_rate is None:
        raise _unknown_rate(rec.source)
    run.note(f"finding beats in {rec.n_samples:,} samples at {rec.sampling_rate:g} Hz on {run.device}")
    with run.stage("detect"):
        peaks = ecg_peaks(rec.samples, rec.sampling_rate, method=method)
    with run.stage("segment"):
        beats = ecg_segment(rec.samples, peaks, rec.sampling_rate, mode=mode)
    return rec, peaks, beats


def run_beats(
    source: Any,
    out: str | Path,
    *,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    method: str = PEAK_METHOD,
    mode: str = BEATS_MODE,
    device: str | torch.device = "auto",
    reference: str | Path | None = None,
    nan: str = "error",
    encoding: str | None = None,
    figures: bool = True,
    strict: bool = False,
    progress: Progress | None = None,
    count_transfers: bool = True,
) -> BeatsResult:
    """Read an ECG, find its beats, cut them into a matrix and write everything to ``out``.

    Writes ``report.html``, ``beats.parquet`` and ``beats.csv`` (peak sample, time in seconds,
    RR interval in seconds, whether segmentation kept it), ``RECORD.qrs`` (WFDB annotations),
    ``beat_matrix.npy`` (``(n_kept, width)`` float32), ``summary.json`` and, with ``figures``,
    ``excerpt.png``, ``heart_rate.png`` and ``intervals.png``. All or nothing: files appear in
    ``out`` only once every one of them is complete. ``count_transfers`` counts host-device
    copies in every stage (``summary.json``'s ``transfers``). ``nan`` is the policy for
    non-finite samples. What looks like a wrong setting (:func:`rate_warnings`) is in the
    result's and the summary's ``warnings``; with ``strict`` it is an error, before anything is
    written.
    """
    run = _start(out, device, count_transfers, progress)
    ref = None if reference is None else read_reference(reference)  # checked before the recording is read
    rec, peaks, beats = _read_and_cut(run, source, channel, sampling_rate, method, mode, nan, encoding)
    fs = rec.sampling_rate
    ref_samples = None if ref is None else _reference_in(ref, rec)
    with run.stage("transfer"):
        host = _to_host({"peaks": peaks, "kept": beats.kept, "matrix": beats.matrix})
        signal = rec.samples.cpu().numpy() if figures else None
    score = None if ref is None else evaluate_beats(ref_samples, host["peaks"], fs, n_samples=rec.n_samples)
    with run.stage("hrv"):
        heart_rate = heart_rate_summary(peaks, fs)
    warnings = rate_warnings(host["peaks"], fs, rec.n_samples)
    if strict and warnings:
        raise DevicepipeError(f"{warnings[0]} (refused under strict; nothing was written).")
    run.note(f"found {host['peaks'].size:,} beats, writing {run.out}")
    with run.stage("write"), staged_dir(run.out) as stage:
        files = write_beat_files(stage, _record_name(rec), host["peaks"], host["kept"], fs)
        files["beat_matrix.npy"] = write_npy(host["matrix"], stage / "beat_matrix.npy")
        if signal is not None:
            files.update(beats_figures(stage, rec, signal, host["peaks"], beats, ref_samples))
        summary = {
            **input_summary(source, rec, run.device),
            "method": method,
            "segmentation": mode,
            "counts": {"beats_found": int(host["peaks"].size), "beats_kept": int(host["kept"].sum())},
            "beat_width": int(host["matrix"].shape[1]) if host["matrix"].ndim == 2 else 0,
            "heart_rate": heart_rate,
            "seconds": run.timer.seconds,
            "accuracy": None if score is None else _accuracy(score, ref.source, fs, rec.n_samples),
            "transfers": run.timer.transfers(),
            "warnings": warnings,
        }
        files[REPORT_NAME] = write_report(stage, "beats", summary, files)
        files["summary.json"] = write_summary(stage, summary, files)
    return BeatsResult(
        source=rec.source,
        device=run.device,
        sampling_rate=fs,
        n_samples=rec.n_samples,
        channel=rec.channels[0],
        peaks=host["peaks"],
        beats=beats,
        seconds=run.timer.seconds,
        files={name: run.out / name for name in files},
        score=score,
        transfers=run.timer.transfers(),
        warnings=tuple(warnings),
    )


#: Heart rates a human ECG can show, in beats per minute; a median outside says the rate is wrong.
PLAUSIBLE_BPM = (20.0, 300.0)


def median_heart_rate(peaks: np.ndarray, sampling_rate: float) -> float | None:
    """60 / the median RR interval, in beats per minute; None with fewer than two beats."""
    if peaks.size < 2:
        return None
    return 60.0 * sampling_rate / float(np.median(np.diff(peaks)))


def rate_warnings(peaks: np.ndarray, sampling_rate: float, n_samples: int) -> list[str]:
    """What the beats found say about the settings: no beat in over a minute of recording, or a
    median heart rate outside :data:`PLAUSIBLE_BPM`, both most often a wrong sampling rate (or
    not an ECG). ``peaks`` are sample indices, shape ``(n_beats,)``."""
    minutes = n_samples / sampling_rate / 60.0
    if peaks.size < 2:
        if minutes > 1.0:
            return [
                f"{peaks.size} beat(s) found in {minutes:.1f} minutes of recording: is it an ECG, and is the "
                f"sampling rate of {sampling_rate:g} Hz right?"
            ]
        return []
    bpm = median_heart_rate(peaks, sampling_rate)
    lo, hi = PLAUSIBLE_BPM
    if lo <= bpm <= hi:
        return []
    return [
        f"the median heart rate is {bpm:.0f} bpm, outside {lo:.0f}-{hi:.0f} bpm: the sampling rate of "
        f"{sampling_rate:g} Hz is most likely wrong (or the recording is not an ECG)"
    ]


def _record_name(rec: Recording) -> str:
    """The record name of the run's WFDB annotation file: the input's name without its suffix,
    in the letters, digits, ``-`` and ``_`` that WFDB record names allow."""
    name = Path(rec.source).name if rec.source else ""
    stem = Path(name).stem if Path(name).suffix else name
    return re.sub(r"[^-\w]", "_", stem, flags=re.ASCII) or "recording"


def _reference_in(ref: ReferenceBeats, rec: Recording) -> np.ndarray:
    """The reference beats as sample indices of ``rec``; a clear error when they do not fit in it."""
    samples = ref.samples_at(rec.sampling_rate)
    if samples.size and int(samples[-1]) >= rec.n_samples:
        raise DevicepipeError(
            f"reference {ref.source} has beats past the end of {rec.source} (the last at sample "
            f"{int(samples[-1]):,}; the recording has {rec.n_samples:,}): is it this recording's reference, "
            "and is the sampling rate right?"
        )
    return samples


def _accuracy(score: BeatScore, source: str, fs: float, n_samples: int) -> dict[str, Any]:
    """``summary.json``'s accuracy: the counts inside the scoring window, and that window."""
    return {
        "reference": source,
        "scoring_window_s": [EDGE_S, n_samples / fs - EDGE_S],
        "tolerance_s": MATCH_TOLERANCE_S,
        "reference_beats_in_window": score.tp + score.fn,
        "beats_found_in_window": score.tp + score.fp,
        **score.to_dict(),
    }


# ----------------------------------------------------------------------------- learning pipelines


@dataclass(frozen=True)
class _Learned:
    """The trained models, their histories, every row's scores, and the threads they used."""

    models: list[torch.nn.Module]
    histories: list[dict[str, list[float]]]
    scores: Scores
    threads: ThreadChoice
    epoch_limit: int
    warning: str | None  # set when a model was still learning when training ended


def _learn(
    run: _Run,
    make_model: Callable[[int], torch.nn.Module],
    data: torch.Tensor,
    settings: LearnSettings,
    extra_state: dict[str, Any],
    epoch_progress: EpochProgress | None,
    what: str,
) -> _Learned:
    """The shared middle of the learning pipelines: train on ``data`` in ``run.out``, score every row."""
    run.out.mkdir(parents=True, exist_ok=True)
    (run.out / "summary.json").unlink(missing_ok=True)  # the directory is incomplete until the end
    probe = data[: settings.batch_size]
    threads = choose_threads(make_model(settings.seed), probe, threads=settings.threads, copies=settings.ensemble)
    run.note(f"training on {what} ({threads.threads} thread{'s' if threads.threads > 1 else ''})")
    with using_threads(threads.threads):
        with run.stage("train"):
            models, histories = train_models(make_model, data, settings, run.out, extra_state, epoch_progress)
        with run.stage("score"):
            scores = score_rows(models, data, settings)
    return _Learned(models, histories, scores, threads, settings.epoch_limit, convergence_warning(histories))


def _identity(source: Any, settings: LearnSettings, **choices: Any) -> dict[str, Any]:
    """What a resumed run must share with the checkpointed one: the input (by content), the
    training settings that shape the model and its data, and the pipeline's ``choices``."""
    fingerprint = input_fingerprint(source)
    kept = {k: getattr(settings, k) for k in ("seed", "batch_size", "lr", "latent", "ensemble", "weight_decay")}
    return {"input": None if fingerprint is None else fingerprint[:16], **kept, **choices}


def _finish(
    run: _Run, summary: dict[str, Any], learned: _Learned, files: dict[str, Path], kind: str, flagged: FlaggedRows
) -> LearnResult:
    """Complete a run's summary (final losses, seconds, transfers, files), write the run's
    ``report.html`` (a ``kind`` page), and ``summary.json`` last."""
    histories = learned.histories
    summary.update(
        epochs={
            "limit": learned.epoch_limit,
            "run": [len(h["train"]) for h in histories],
            "kept": [h["best_epoch"] or len(h["train"]) for h in histories],  # whose weights the models have
            "stopped_early": [h["stopped_early"] for h in histories],
        },
        final_loss={"train": [h["train"][-1] for h in histories], "val": [h["val"][-1] for h in histories]},
        converged=learned.warning is None,
        warnings=[] if learned.warning is None else [learned.warning],
        seconds=run.timer.seconds,
        transfers=run.timer.transfers(),
        threads=learned.threads.to_dict(),
    )
    files[REPORT_NAME] = write_report(run.out, kind, summary, files, flagged=flagged)
    files["summary.json"] = write_summary(run.out, summary, files)
    return LearnResult(run.out, summary, files)


def run_ecg(
    source: Any,
    out: str | Path,
    *,
    settings: LearnSettings | None = None,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    device: str | torch.device = "auto",
    mode: str = ECG_MODE,
    width: int = BEAT_WIDTH,
    method: str = PEAK_METHOD,
    reference: str | Path | None = None,
    nan: str = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    epoch_progress: EpochProgress | None = None,
    count_transfers: bool = True,
) -> LearnResult:
    """Read an ECG, find and cut its beats, train a VAE (or a vmap ensemble), score, write, plot.

    ``reference`` (a WFDB annotation file or a table of R peaks with labels, such as the
    simulator's truth file) labels each beat by its nearest reference beat within 150 ms: the
    labels go into ``embeddings.parquet`` (column ``reference``) and the figures, and
    ``summary.json`` counts the beats and the flagged beats of each label.

    Beats are windows centred on each R peak by default (``mode="centered"``, 0.25 s before to
    0.45 s after): the notebook's peak-to-peak segmentation (``mode="seed"``) drops every
    premature beat followed by a compensatory pause, the very beats an anomaly score should
    find. Rows are resampled to ``width`` samples (a power of two) whatever the sampling rate.

    Writes to ``out``: ``summary.json`` (last, so a directory without it is incomplete),
    ``beats.parquet``, ``embeddings.parquet`` (peak, time, latent means, score, flag, spread),
    ``checkpoint.pt`` (or ``ensemble.pt``), ``history.csv`` and figures (``training.png``,
    ``latent.png``, ``generated.png`` and ``.pdf``, ``extremes.png``, ``excerpt.png``).
    """
    settings = settings or LearnSettings()
    vae = LightVAEConfig(width=width, latent=settings.latent)  # checked before anything is read or written
    ref = None if reference is None else read_reference(reference)
    if ref is not None and ref.symbols is None:
        raise DevicepipeError(
            f"reference {ref.source} has no beat labels; ecg needs labelled beats (a WFDB annotation file, "
            "or a table with a 'symbol' column such as the simulator's truth file)."
        )
    run = _start(out, device, count_transfers, progress)
    identity = _identity(
        source, settings, channel=channel, sampling_rate=sampling_rate, method=method, mode=mode, width=width, nan=nan
    )
    check_before_start(run.out, settings, identity)
    rec, peaks, beats = _read_and_cut(run, source, channel, sampling_rate, method, mode, nan, encoding)
    with run.stage("segment"):
        matrix = resample_rows(beats.matrix, width)
    if matrix.shape[0] < MIN_BEATS_TO_TRAIN:
        problem = (
            f"only {matrix.shape[0]} beats were cut from {rec.source}; "
            f"at least {MIN_BEATS_TO_TRAIN} are needed to train"
        )
        raise DevicepipeError(
            f"{problem} (is it an ECG? is the sampling rate right?).",
            cli=f"{problem} (is it an ECG? is --sampling-rate right?).",
        )
    with run.stage("scale"):
        scaler = StandardScaler().fit(matrix.reshape(-1))
        data = scaler.transform(matrix.reshape(-1)).reshape(matrix.shape)

    def make_model(seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        return LightVAE(vae).to(run.device)

    extra = {"scaler": scaler.state_dict(), "identity": identity}
    learned = _learn(run, make_model, data, settings, extra, epoch_progress, f"{data.shape[0]:,} beats")
    scores, first = learned.scores, learned.models[0]
    with run.stage("score"):
        grid = latent_grid(scores.embeddings, 5)
        generated = first.decode(grid).detach()
        centre = first.decode(scores.embeddings.mean(0, keepdim=True)).detach()[0]
        order = torch.argsort(scores.scores)
        extreme_idx = torch.cat([order[-5:], order[:5]])  # the five highest scores, then the five lowest
        extreme_recon = reconstruct(first, data[extreme_idx])
        top_flagged = order.flip(0)[: int(scores.flags.sum())][:MAX_FLAGGED_ROWS]
        typical = data.median(0).values
    with run.stage("transfer"):
        host = scores.to_host() | _to_host(
            {
                "all_peaks": peaks,
                "peaks": beats.peaks,
                "kept": beats.kept,
                "grid": grid,
                "generated": generated,
                "centre": centre,
                "extreme_idx": extreme_idx,
                "extreme_recon": extreme_recon,
                "extreme_rows": data[extreme_idx],
                "top_flagged": top_flagged,
                "flagged_rows": data[top_flagged],
                "typical": typical,
            }
        )
        signal = rec.samples.cpu().numpy()
    fs = rec.sampling_rate
    with run.stage("hrv"):
        heart_rate = heart_rate_summary(peaks, fs)
    if ref is not None:
        host["truth"] = label_beats(_reference_in(ref, rec), ref.symbols, host["peaks"], fs)
    with run.stage("write"):
        per_peak, flagged_peak = np.full(host["all_peaks"].size, np.nan), np.zeros(host["all_peaks"].size, bool)
        per_peak[host["kept"]], flagged_peak[host["kept"]] = host["scores"], host["flags"]
        files = write_beat_files(
            run.out,
            _record_name(rec),
            host["all_peaks"],
            host["kept"],
            fs,
            scores=per_peak,
            flags=flagged_peak,
        )
        leading = {"peak": host["peaks"], "time_s": host["peaks"] / fs}
        if ref is not None:
            leading["reference"] = host["truth"]
        files.update(write_scores(run.out, leading, host, learned.histories))
        beat_rate = width / beats.window_s  # Hz of the resampled beat rows
        args = (host, learned.histories, scores.threshold, beat_rate, learned.warning)
        files.update(ecg_figures(run.out, rec, signal, *args))
    flagged = np.flatnonzero(host["flags"])
    flagged = flagged[np.argsort(host["scores"][flagged])[::-1]]
    summary = {
        **input_summary(source, rec, run.device),
        "settings": {**settings.to_dict(), "mode": mode, "width": width, "method": method},
        "heart_rate": heart_rate,
        "counts": {
            "beats_found": int(host["all_peaks"].size),
            "beats_kept": int(host["peaks"].size),
            "flagged": int(flagged.size),
        },
        "threshold": scores.threshold,
        "threshold_means": (
            f"the {settings.percentile:g}th percentile of the training beats' scores; a score is the mean squared "
            "reconstruction error of a beat standardised by the recording's mean and standard deviation "
            "(units: squared standard deviations)"
        ),
        "flagged": [
            {"peak": int(host["peaks"][i]), "time_s": float(host["peaks"][i] / fs), "score": float(host["scores"][i])}
            | ({} if ref is None else {"reference": str(host["truth"][i])})
            for i in flagged
        ],
    }
    if ref is not None:
        summary["reference"] = _reference_counts(ref.source, host["truth"], host["flags"])
    top = host["top_flagged"]
    page = FlaggedRows(
        names=[f"{host['peaks'][i] / fs:,.1f} s" for i in top],
        scores=host["scores"][top],
        rows=host["flagged_rows"],
        typical=host["typical"],
        labels=None if ref is None else [str(host["truth"][i]) for i in top],
        unit="standard deviations of the recording",
        total=int(host["flags"].sum()),
    )
    return _finish(run, summary, learned, files, "ecg", page)


def _reference_counts(source: str, truth: np.ndarray, flags: np.ndarray) -> dict[str, Any]:
    """Per reference label (``""``: no reference beat within 150 ms), the beats and the flagged beats."""
    labels = {}
    for value in sorted(set(truth.tolist())):
        sel = truth == value
        labels[value or "none"] = {"beats": int(sel.sum()), "flagged": int(flags[sel].sum())}
    return {"source": source, "tolerance_s": MATCH_TOLERANCE_S, "labels": labels}


def run_series(
    source: Any,
    out: str | Path,
    *,
    column: str | int | None = None,
    time_column: str | int | None = None,
    time_format: str | None = None,
    window: str = SERIES_WINDOW,
    pointwise: bool = False,
    settings: LearnSettings | None = None,
    hidden: int = SERIES_HIDDEN,
    device: str | torch.device = "auto",
    nan: str = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    epoch_progress: EpochProgress | None = None,
    count_transfers: bool = True,
) -> LearnResult:
    """Windows of a load series, MinMax scaling, the MLP autoencoder, anomalous windows.

    Duplicate timestamps are averaged and gaps filled (up to two steps per window) or the
    window dropped, all reported in ``summary.json``. ``pointwise`` trains the notebook's
    per-sample autoencoder (input size 1) instead and scores each window by the mean error
    of its samples. Writes ``summary.json`` (last), ``embeddings.parquet`` (window start,
    latent code, score, flag, spread), ``checkpoint.pt`` (or ``ensemble.pt``),
    ``history.csv`` and figures (``training.png``, ``latent.png``, ``extremes.png``,
    ``days.png``). ``settings`` defaults to :class:`SeriesLearnSettings`.
    """
    settings = settings or SeriesLearnSettings()
    window_s = parse_duration(window)
    if time_column is None:
        raise DevicepipeError(
            "a load series needs its time column: pass time_column= (e.g. time_column='Datetime').",
            cli="a load series needs its time column: pass --time-column (e.g. --time-column Datetime).",
        )
    run = _start(out, device, count_transfers, progress)
    identity = _identity(
        source,
        settings,
        column=column,
        time_column=time_column,
        time_format=time_format,
        window=window,
        pointwise=pointwise,
        hidden=hidden,
        nan=nan,
    )
    check_before_start(run.out, settings, identity)
    with run.stage("read"):
        rec = read_series(
            source,
            column,
            device=run.device,
            time_column=time_column,
            time_format=time_format,
            duplicates="mean",
            nan=nan,
            encoding=encoding,
        )
    if rec.samples.ndim != 1:
        problem = f"{rec.source} has {rec.n_channels} value columns"
        raise DevicepipeError(f"{problem}; choose one with column=.", cli=f"{problem}; choose one with --column.")
    report = rec.time_report
    run.note(f"read {report.summary()}; {rec.n_samples:,} time points after that")
    with run.stage("window"):
        wins = make_windows(rec.samples, rec.timestamps, window_s=window_s, step_s=report.step_s)
    if wins.values.shape[0] < MIN_WINDOWS_TO_TRAIN:
        raise DevicepipeError(
            f"only {wins.values.shape[0]} complete windows of {window}; need at least {MIN_WINDOWS_TO_TRAIN}."
        )
    with run.stage("scale"):
        scaler = MinMaxScaler().fit(wins.values.reshape(-1))
        data = scaler.transform(wins.values.reshape(-1)).reshape(wins.values.shape)
    per = wins.per_window
    rows = data.reshape(-1, 1) if pointwise else data  # the notebook's model sees one sample at a time

    def make_model(seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        cfg = MLPAutoencoderConfig(input=rows.shape[1], hidden=hidden, latent=settings.latent)
        return MLPAutoencoder(cfg).to(run.device)

    extra = {"scaler": scaler.state_dict(), "window_s": window_s, "identity": identity}
    what = f"{rows.shape[0]:,} {'samples' if pointwise else 'windows'} of {per} steps"
    learned = _learn(run, make_model, rows, settings, extra, epoch_progress, what)
    with run.stage("score"):
        scores = group_scores(learned.scores, per, settings.percentile) if pointwise else learned.scores
        recon = reconstruct(learned.models[0], rows).reshape(data.shape)
        raw_recon = scaler.inverse_transform(recon.reshape(-1)).reshape(recon.shape)
    with run.stage("transfer"):
        host = scores.to_host() | _to_host({"days": wins.values, "recon": raw_recon})
    flagged = np.array([i for i in np.argsort(host["scores"])[::-1] if host["flags"][i]], dtype=np.int64)
    with run.stage("write"):
        leading = {"start": wins.starts, "filled_slots": wins.filled}
        files = write_scores(run.out, leading, host, learned.histories)
        args = (host, learned.histories, scores.threshold, rec.channels[0], pointwise, flagged, learned.warning)
        files.update(series_figures(run.out, wins, *args))
    summary = {
        **input_summary(source, rec, run.device, channel_key="column"),
        "window": window,
        "steps_per_window": per,
        "pointwise": pointwise,
        "settings": {**settings.to_dict(), "hidden": hidden},
        "time": report.to_dict(),
        "windows": {
            "used": int(wins.values.shape[0]),
            "filled_slots": int(wins.filled.sum()),
            "windows_with_filled_slots": int((wins.filled > 0).sum()),
            "dropped": [str(d)[:19] for d in wins.dropped],
        },
        "threshold": scores.threshold,
        "threshold_means": (
            f"the {settings.percentile:g}th percentile of the training windows' scores; a score is the mean squared "
            "reconstruction error of a window scaled to [0, 1] by the series' minimum and maximum "
            "(units: squared fractions of that range)"
        ),
        "flagged": [{"start": str(wins.starts[i])[:19], "score": float(host["scores"][i])} for i in flagged],
    }
    top = flagged[:MAX_FLAGGED_ROWS]
    page = FlaggedRows(
        names=[str(wins.starts[i])[:10] for i in top],
        scores=host["scores"][top],
        rows=host["days"][top],
        typical=np.median(host["days"], axis=0),
        unit=rec.channels[0],
        total=int(flagged.size),
    )
    return _finish(run, summary, learned, files, "series", page)


@dataclass(frozen=True)
class DemoResult:
    """What :func:`run_demo` simulated, the ``ecg`` run on it, and how many ectopic beats it flagged."""

    run: LearnResult
    input: Path  # the simulated recording
    truth: Path  # its R peaks and their symbols
    n_beats: int
    n_ectopic: int  # simulated ventricular ectopic beats
    ectopic_flagged: int  # of the ectopic beats labelled V by the truth file (within 150 ms), how many were flagged


def run_demo(
    out: str | Path = "demo-run",
    *,
    device: str | torch.device = "auto",
    epochs: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    epoch_progress: EpochProgress | None = None,
) -> DemoResult:
    """Simulate a 30-minute ECG at 250 Hz with about 1 % ventricular ectopic beats, run :func:`run_ecg`
    on it in ``out`` (the recording in ``out/input/``), and count the ectopic beats it flagged."""
    note = progress or (lambda _msg: None)
    out = check_output_dir(out)
    settings = LearnSettings(epochs=epochs, threads=threads)
    note("simulating a 30-minute ECG at 250 Hz with a few ectopic beats")
    sim = simulate_ecg(1800.0, 250.0, heart_rate_bpm=72.0, noise_mV=0.03, wander_mV=0.2, ectopic_rate=0.01, seed=0)
    path, truth = write_simulated_ecg(sim, out / "input" / "ecg.parquet")
    ectopic = sim.r_peaks.cpu().numpy()[sim.symbols == "V"]
    note(f"simulated {path} ({sim.r_peaks.numel():,} beats, {ectopic.size} ventricular ectopic; truth in {truth})")
    result = run_ecg(
        path, out, settings=settings, device=device, reference=truth, progress=note, epoch_progress=epoch_progress
    )
    found = result.summary["reference"]["labels"].get("V", {}).get("flagged", 0)
    return DemoResult(result, path, truth, int(sim.r_peaks.numel()), int(ectopic.size), found)
