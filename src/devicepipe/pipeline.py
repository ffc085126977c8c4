"""Pipelines: the stages in order, timed, with their outputs written atomically.

The CLI calls these; they never print. Progress is reported through an optional callback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.device import resolve_device, synchronize
from devicepipe.ecg import Beats, BeatScore, ecg_peaks, ecg_segment, evaluate_beats
from devicepipe.errors import DevicepipeError
from devicepipe.interop import TransferLedger, count_transfers
from devicepipe.io import (
    Recording,
    check_output_dir,
    read_beat_annotations,
    read_series,
    staged_dir,
    write_json,
    write_npy,
    write_parquet,
)

__all__ = ["BeatsResult", "StageTimer", "run_beats"]

Progress = Callable[[str], None]


@dataclass
class StageTimer:
    """Wall-clock seconds per stage, with the device synchronised at each boundary."""

    device: torch.device
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        synchronize(self.device)
        started = time.perf_counter()
        yield
        synchronize(self.device)
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


def _read_and_cut(
    source: Any,
    channel: str | int | None,
    sampling_rate: float | None,
    dev: torch.device,
    method: str,
    mode: str,
    timer: StageTimer,
    note: Progress,
) -> tuple[Any, torch.Tensor, Beats]:
    """Read one ECG channel (the first by default) onto ``dev``, find its beats and cut them; timed."""
    with timer.stage("read"):
        rec = read_series(source, channel if channel is not None else 0, device=dev, sampling_rate=sampling_rate)
    if rec.sampling_rate is None:
        raise DevicepipeError(
            f"the sampling rate of {rec.source} is unknown; pass --sampling-rate HZ (e.g. --sampling-rate 250)."
        )
    note(f"finding beats in {rec.n_samples:,} samples at {rec.sampling_rate:g} Hz on {dev}")
    with timer.stage("detect"):
        peaks = ecg_peaks(rec.samples, rec.sampling_rate, method=method)
    with timer.stage("segment"):
        beats = ecg_segment(rec.samples, peaks, rec.sampling_rate, mode=mode)
    return rec, peaks, beats


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
    transfers: TransferLedger | None = None

    @property
    def mean_heart_rate_bpm(self) -> float | None:
        if self.peaks.size < 2:
            return None
        return 60.0 * self.sampling_rate / float(np.median(np.diff(self.peaks)))


def _describe_input(source: Any, rec: Recording, dev: torch.device, *, channel_key: str = "channel") -> dict[str, Any]:
    """The summary.json fields that say what was read, where it ran, and how long it is."""
    return {
        "input": str(source) if isinstance(source, (str, Path)) else type(source).__name__,
        channel_key: rec.channels[0],
        "device": str(dev),
        "sampling_rate_hz": rec.sampling_rate,
        "n_samples": rec.n_samples,
    }


def run_beats(
    source: Any,
    out: str | Path,
    *,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    method: str = "ricker",
    mode: str = "seed",
    device: str | torch.device = "auto",
    reference: str | Path | None = None,
    figures: bool = True,
    progress: Progress | None = None,
) -> BeatsResult:
    """Read an ECG, find its beats, cut them into a matrix and write everything to ``out``.

    Writes ``beats.parquet`` (peak sample, time in seconds, RR interval in seconds, whether
    segmentation kept it), ``beat_matrix.npy`` (``(n_kept, width)`` float32), ``summary.json``
    and, with ``figures``, ``excerpt.png`` and ``intervals.png``. All or nothing: files appear
    in ``out`` only once every one of them is complete.
    """
    check_output_dir(out)
    with count_transfers() as ledger:
        return _run_beats(
            source,
            out,
            channel,
            sampling_rate,
            method,
            mode,
            resolve_device(device),
            reference,
            figures,
            progress or (lambda _msg: None),
            ledger,
        )


def _run_beats(
    source: Any,
    out: str | Path,
    channel: str | int | None,
    sampling_rate: float | None,
    method: str,
    mode: str,
    dev: torch.device,
    reference: str | Path | None,
    figures: bool,
    note: Progress,
    ledger: TransferLedger,
) -> BeatsResult:
    timer = StageTimer(dev)
    rec, peaks, beats = _read_and_cut(source, channel, sampling_rate, dev, method, mode, timer, note)
    fs = rec.sampling_rate
    ref = None
    if reference is not None:
        ref = read_beat_annotations(reference)
    with timer.stage("transfer"):
        peaks_host = peaks.cpu().numpy()
        kept_host = beats.kept.cpu().numpy()
        matrix_host = beats.matrix.cpu().numpy()
        signal_host = rec.samples.cpu().numpy() if figures else None
    score = None
    if ref is not None:
        score = evaluate_beats(ref.samples, peaks_host, fs, n_samples=rec.n_samples)
    note(f"found {peaks_host.size:,} beats, writing {out}")
    rr = np.diff(peaks_host, prepend=np.nan) / fs if peaks_host.size else np.zeros(0)
    files: dict[str, Path] = {}
    with timer.stage("write"), staged_dir(out) as stage:
        write_parquet(
            {"peak": peaks_host, "time_s": peaks_host / fs, "rr_s": rr, "kept": kept_host},
            stage / "beats.parquet",
            sampling_rate=fs,
        )
        write_npy(matrix_host, stage / "beat_matrix.npy")
        if figures and signal_host is not None:
            from devicepipe.plot import plot_beats_excerpt, plot_intervals, save_figure  # noqa: PLC0415

            save_figure(
                plot_beats_excerpt(
                    signal_host,
                    fs,
                    peaks_host,
                    reference=None if ref is None else ref.samples,
                    unit=rec.units[0],
                    title=f"{rec.source} ({rec.channels[0]}): detected beats",
                ),
                stage / "excerpt.png",
            )
            lengths = np.diff(peaks_host)
            keep = (int(round(0.4 * fs)), int(round(1.024 * fs))) if mode == "seed" else None
            save_figure(plot_intervals(rr[1:], lengths, keep_range=keep), stage / "intervals.png")
        summary = {
            **_describe_input(source, rec, dev),
            "method": method,
            "segmentation": mode,
            "n_beats": int(peaks_host.size),
            "n_kept": int(kept_host.sum()),
            "beat_width": int(matrix_host.shape[1]) if matrix_host.ndim == 2 else 0,
            "seconds": timer.seconds,
            "accuracy": None if score is None else score.to_dict(),
            "transfers": ledger.to_dict(),
        }
        write_json(summary, stage / "summary.json")
        names = ["beats.parquet", "beat_matrix.npy", "summary.json"] + (
            ["excerpt.png", "intervals.png"] if figures else []
        )
    files = {name: Path(out) / name for name in names}
    return BeatsResult(
        source=rec.source,
        device=dev,
        sampling_rate=fs,
        n_samples=rec.n_samples,
        channel=rec.channels[0],
        peaks=peaks_host,
        beats=beats,
        seconds=timer.seconds,
        files=files,
        score=score,
    )


# ----------------------------------------------------------------------------- learning pipelines


@dataclass(frozen=True)
class LearnSettings:
    """Training and scoring settings shared by the ``ecg`` and ``series`` pipelines."""

    epochs: int = 30
    batch_size: int = 256
    lr: float = 3e-3
    weight_decay: float = 0.0
    val_fraction: float = 0.1
    seed: int = 0
    latent: int = 2
    ensemble: int = 1
    percentile: float = 99.0
    resume: bool = False
    tensorboard: str | None = None
    bf16: bool = False

    def check(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.latent < 1 or self.ensemble < 1:
            raise DevicepipeError("epochs, batch size, latent size and ensemble size must all be at least 1.")
        if not 0 < self.lr < 1:
            raise DevicepipeError(f"learning rate {self.lr} is out of range; use e.g. 1e-3.")
        if not 0 <= self.val_fraction < 0.9:
            raise DevicepipeError(f"validation fraction {self.val_fraction} must be within [0, 0.9).")
        if not 50 <= self.percentile < 100:
            raise DevicepipeError(f"anomaly percentile {self.percentile} must be within [50, 100).")
        if self.resume and self.ensemble > 1:
            raise DevicepipeError("--resume works for single models; rerun the ensemble without --resume.")


@dataclass(frozen=True)
class LearnResult:
    """What a learning pipeline produced (host copies of the small results)."""

    out: Path
    summary: dict[str, Any]
    files: dict[str, Path]


def _train(
    make_model: Callable[[int], torch.nn.Module],
    data: torch.Tensor,
    settings: LearnSettings,
    out: Path,
    extra_state: dict[str, Any],
    progress: Callable[[int, float, float], None] | None,
):
    """One model (checkpointed, resumable) or a vmap ensemble; returns (models, histories)."""
    from devicepipe.ensemble import fit_ensemble  # noqa: PLC0415
    from devicepipe.train import fit, load_checkpoint  # noqa: PLC0415

    common = dict(
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        lr=settings.lr,
        weight_decay=settings.weight_decay,
        val_fraction=settings.val_fraction,
    )
    if settings.ensemble > 1:
        ens = fit_ensemble(make_model, data, members=settings.ensemble, seed=settings.seed, callback=progress, **common)
        torch.save(
            {
                "members": [m.state_dict() for m in ens.members],
                "seeds": ens.seeds,
                "model_kind": type(ens.members[0]).__name__,
                "config": ens.members[0].config_dict(),
                **extra_state,
            },
            out / "ensemble.pt",
        )
        return ens.members, [h.to_dict() for h in ens.histories]
    model = make_model(settings.seed)
    if settings.resume:
        state = load_checkpoint(out)
        if state.get("config") != model.config_dict():
            raise DevicepipeError(
                f"the checkpoint in {out} is for {state.get('config')}, not {model.config_dict()}; "
                "resume with the settings of the original run."
            )
    history = fit(
        model,
        data,
        seed=settings.seed,
        checkpoint_dir=out,
        resume=settings.resume,
        extra_state=extra_state,
        callback=progress,
        tensorboard=settings.tensorboard,
        bf16=settings.bf16,
        **common,
    )
    return [model], [history.to_dict()]


def _write_history(histories: list[dict[str, list[float]]], path: Path) -> None:
    from devicepipe.io import write_csv  # noqa: PLC0415

    cols: dict[str, Any] = {"epoch": np.arange(1, len(histories[0]["train"]) + 1)}
    for i, h in enumerate(histories):
        suffix = "" if len(histories) == 1 else f"_{i}"
        cols[f"train_loss{suffix}"] = np.asarray(h["train"])
        cols[f"val_loss{suffix}"] = np.asarray(h["val"])
        cols[f"seconds{suffix}"] = np.asarray(h["seconds"])
    write_csv(cols, path)


def _write_scores(
    out: Path, leading: dict[str, Any], host: dict[str, np.ndarray], histories: list[dict[str, list[float]]]
) -> dict[str, Path]:
    """``embeddings.parquet`` (the ``leading`` columns, latent codes, score, flag, spread) and
    ``history.csv``; lists the checkpoint too."""
    emb = dict(leading)
    for j in range(host["emb"].shape[1]):
        emb[f"z{j}"] = host["emb"][:, j]
    emb.update(score=host["scores"], flag=host["flags"], spread=host["spread"])
    files = {"embeddings.parquet": write_parquet(emb, out / "embeddings.parquet")}
    _write_history(histories, out / "history.csv")
    files["history.csv"] = out / "history.csv"
    for name in ("checkpoint.pt", "ensemble.pt"):
        if (out / name).exists():
            files[name] = out / name
    return files


def resample_rows(matrix: torch.Tensor, width: int) -> torch.Tensor:
    """Linearly resample each row of ``(n, w)`` to ``(n, width)`` (identity when ``w == width``)."""
    if matrix.shape[1] == width:
        return matrix
    return torch.nn.functional.interpolate(matrix[:, None, :], size=width, mode="linear", align_corners=False)[:, 0]


def run_ecg(
    source: Any,
    out: str | Path,
    *,
    settings: LearnSettings | None = None,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    device: str | torch.device = "auto",
    mode: str = "centered",
    width: int = 256,
    method: str = "ricker",
    progress: Progress | None = None,
    epoch_progress: Callable[[int, float, float], None] | None = None,
) -> LearnResult:
    """Read an ECG, find and cut its beats, train a VAE (or a vmap ensemble), score, write, plot.

    Beats are windows centred on each R peak by default (``mode="centered"``, 0.25 s before to
    0.45 s after): the notebook's peak-to-peak segmentation (``mode="seed"``) drops every
    premature beat followed by a compensatory pause, the very beats an anomaly score should
    find. Rows are resampled to ``width`` samples (a power of two) whatever the sampling rate.

    Writes to ``out``: ``summary.json`` (last, so a directory without it is incomplete),
    ``beats.parquet``, ``embeddings.parquet`` (peak, time, latent means, score, flag, spread),
    ``checkpoint.pt`` (or ``ensemble.pt``), ``history.csv`` and figures (``training.png``,
    ``latent.png``, ``generated.png`` and ``.pdf``, ``extremes.png``, ``excerpt.png``).
    """
    from devicepipe.models import LightVAE, LightVAEConfig  # noqa: PLC0415
    from devicepipe.scale import StandardScaler  # noqa: PLC0415
    from devicepipe.score import reconstruct, score  # noqa: PLC0415

    settings = settings or LearnSettings()
    settings.check()
    LightVAEConfig(width=width, latent=settings.latent)  # validates before anything is written
    note = progress or (lambda _m: None)
    out = check_output_dir(out)
    if settings.resume and not (out / "checkpoint.pt").exists():
        raise DevicepipeError(f"nothing to resume: {out / 'checkpoint.pt'} does not exist.")
    dev = resolve_device(device)
    with count_transfers() as ledger:
        timer = StageTimer(dev)
        rec, peaks, beats = _read_and_cut(source, channel, sampling_rate, dev, method, mode, timer, note)
        fs = rec.sampling_rate
        with timer.stage("segment"):
            matrix = resample_rows(beats.matrix, width)
        if matrix.shape[0] < 20:
            raise DevicepipeError(
                f"only {matrix.shape[0]} beats were cut from {rec.source}; at least 20 are needed "
                "to train (is it an ECG? is --sampling-rate right?)."
            )
        with timer.stage("scale"):
            scaler = StandardScaler().fit(matrix.reshape(-1))
            data = scaler.transform(matrix.reshape(-1)).reshape(matrix.shape)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").unlink(missing_ok=True)  # the directory is incomplete until the end

        def make_model(seed: int) -> torch.nn.Module:
            torch.manual_seed(seed)
            return LightVAE(LightVAEConfig(width=width, latent=settings.latent)).to(dev)

        note(f"training on {data.shape[0]:,} beats")
        with timer.stage("train"):
            models, histories = _train(make_model, data, settings, out, {"scaler": scaler.state_dict()}, epoch_progress)
        with timer.stage("score"):
            from devicepipe.train import split_indices  # noqa: PLC0415

            train_rows, _ = split_indices(data.shape[0], settings.val_fraction, settings.seed, dev)
            scores = score(models, data, train_rows=train_rows, percentile=settings.percentile)
            grid = _latent_grid(scores.embeddings, 5)
            generated = models[0].decode(grid).detach()
            order = torch.argsort(scores.scores)
            extreme_idx = torch.cat([order[-5:], order[:5]])
            extreme_recon = reconstruct(models[0], data[extreme_idx])
        with timer.stage("transfer"):
            host = {
                k: v.detach().cpu().numpy()
                for k, v in {
                    "peaks": beats.peaks,
                    "kept": beats.kept,
                    "emb": scores.embeddings,
                    "scores": scores.scores,
                    "spread": scores.spread,
                    "flags": scores.flags,
                    "grid": grid,
                    "generated": generated,
                    "extreme_idx": extreme_idx,
                    "extreme_recon": extreme_recon,
                    "extreme_rows": data[extreme_idx],
                    "all_peaks": peaks,
                }.items()
            }
            signal_host = rec.samples.cpu().numpy()
    with timer.stage("write"):
        files = _write_ecg_outputs(out, rec, fs, host, signal_host, histories, scores.threshold, width, mode)
        summary = {
            **_describe_input(source, rec, dev),
            "settings": {**settings.__dict__, "mode": mode, "width": width, "method": method},
            "counts": {
                "beats_found": int(host["all_peaks"].size),
                "beats_kept": int(host["peaks"].size),
                "flagged": int(host["flags"].sum()),
            },
            "threshold": scores.threshold,
        }
    return _finish(out, summary, histories, timer, ledger, files)


def _finish(
    out: Path,
    summary: dict[str, Any],
    histories: list[dict[str, list[float]]],
    timer: StageTimer,
    ledger: TransferLedger,
    files: dict[str, Path],
) -> LearnResult:
    """Complete a run's summary (final losses, seconds, transfers, files) and write it last."""
    summary.update(
        final_loss={"train": [h["train"][-1] for h in histories], "val": [h["val"][-1] for h in histories]},
        seconds=timer.seconds,
        transfers=ledger.to_dict(),
        files=sorted(p.name for p in files.values()),
    )
    files["summary.json"] = write_json(summary, out / "summary.json")
    return LearnResult(out, summary, files)


def _latent_grid(embeddings: torch.Tensor, n: int) -> torch.Tensor:
    """``n * n`` latent points spanning the embeddings' 2-98 % range in the first two dimensions."""
    latent = embeddings.shape[1]
    lo = torch.quantile(embeddings[:, : min(2, latent)].float(), 0.02, dim=0)
    hi = torch.quantile(embeddings[:, : min(2, latent)].float(), 0.98, dim=0)
    axes = [torch.linspace(float(lo[i]), float(hi[i]), n, device=embeddings.device) for i in range(lo.numel())]
    if latent == 1:
        return torch.linspace(float(lo[0]), float(hi[0]), n * n, device=embeddings.device)[:, None]
    gy, gx = torch.meshgrid(axes[1].flip(0), axes[0], indexing="ij")  # top row = highest z1
    grid = embeddings.mean(0, keepdim=True).repeat(n * n, 1)
    grid[:, 0], grid[:, 1] = gx.reshape(-1), gy.reshape(-1)
    return grid


def _write_ecg_outputs(
    out: Path,
    rec: Any,
    fs: float,
    host: dict[str, np.ndarray],
    signal: np.ndarray,
    histories: list[dict[str, list[float]]],
    threshold: float,
    width: int,
    mode: str,
) -> dict[str, Path]:
    from devicepipe.plot import (  # noqa: PLC0415
        plot_beats_excerpt,
        plot_extremes,
        plot_generated,
        plot_latent,
        plot_training,
        save_figure,
    )

    files: dict[str, Path] = {}
    peaks = host["all_peaks"]
    rr = np.diff(peaks, prepend=np.nan) / fs
    files["beats.parquet"] = write_parquet(
        {"peak": peaks, "time_s": peaks / fs, "rr_s": rr, "kept": host["kept"]}, out / "beats.parquet", sampling_rate=fs
    )
    files.update(_write_scores(out, {"peak": host["peaks"], "time_s": host["peaks"] / fs}, host, histories))
    beat_fs = width / (1.024 if mode == "seed" else 0.7)  # resampled rate of the beat rows
    figs = {
        "training.png": plot_training(histories, title=f"VAE training on {host['peaks'].size:,} beats"),
        "latent.png": plot_latent(
            host["emb"],
            scores=host["scores"],
            threshold=threshold,
            title=f"Latent means of {host['peaks'].size:,} beats, coloured by reconstruction error",
        ),
        "extremes.png": plot_extremes(
            host["extreme_rows"],
            host["extreme_recon"],
            host["scores"][host["extreme_idx"]],
            sampling_rate=beat_fs,
            names=[f"t={host['peaks'][i] / fs:.1f} s" for i in host["extreme_idx"]],
            title="Most and least anomalous beats (scaled) with their reconstructions",
        ),
        "excerpt.png": plot_beats_excerpt(
            signal, fs, peaks, unit=rec.units[0], title=f"{rec.source} ({rec.channels[0]}): detected beats"
        ),
    }
    gen = plot_generated(host["generated"], host["grid"], sampling_rate=beat_fs)
    files["generated.pdf"] = save_figure(gen, out / "generated.pdf")
    figs["generated.png"] = gen
    for name, fig in figs.items():
        files[name] = save_figure(fig, out / name)
    return files


@dataclass(frozen=True)
class Windows:
    """Fixed windows of a time-indexed series on a regular grid.

    ``values`` ``(n_windows, per_window)``; ``starts`` (numpy datetime64[ns]) of each window;
    ``filled`` the number of missing slots filled by interpolation in each window; ``dropped``
    the starts of windows left out (too many slots missing).
    """

    values: torch.Tensor
    starts: np.ndarray
    filled: np.ndarray
    dropped: np.ndarray
    step_s: float


def make_windows(
    values: torch.Tensor, timestamps: torch.Tensor, *, window_s: float, step_s: float, max_missing: int = 2
) -> Windows:
    """Put a sorted, duplicate-free series on a regular grid of ``step_s`` and cut windows of ``window_s``.

    Windows start at multiples of ``window_s`` since the Unix epoch (midnight for days). A
    window missing up to ``max_missing`` slots is filled by linear interpolation along the
    series (and counted); one missing more is dropped (and listed). Works on ``values``' device.
    """
    per = int(round(window_s / step_s))
    if per < 2 or abs(per * step_s - window_s) > 1e-6 * window_s:
        raise DevicepipeError(f"the window ({window_s:g} s) must hold a whole number (>= 2) of {step_s:g}-s steps.")
    step_ns, win_ns = int(round(step_s * 1e9)), int(round(window_s * 1e9))
    if torch.any(timestamps % step_ns != timestamps[0] % step_ns):
        raise DevicepipeError(f"timestamps are not on a regular {step_s:g}-s grid; resample the series first.")
    first = torch.div(timestamps[0], win_ns, rounding_mode="floor")
    slot = torch.div(timestamps - first * win_ns, step_ns, rounding_mode="floor")  # position on the full grid
    n_windows = int(slot[-1]) // per + 1
    grid = torch.full((n_windows * per,), float("nan"), dtype=values.dtype, device=values.device)
    grid[slot] = values
    missing = torch.isnan(grid).view(n_windows, per).sum(1)
    present = missing < per
    keep = present & (missing <= max_missing)
    if torch.isnan(grid).any():  # fill the holes linearly along the series (holes in dropped windows too)
        from devicepipe.io import _apply_nan_policy  # noqa: PLC0415

        grid = _apply_nan_policy(grid[None], None, "interpolate", "the series")[0][0]
    starts = (first * win_ns + torch.arange(n_windows, device=values.device) * win_ns).cpu().numpy()
    starts = starts.view("datetime64[ns]")
    keep_h, present_h = keep.cpu().numpy(), present.cpu().numpy()
    return Windows(
        values=grid.view(n_windows, per)[keep],
        starts=starts[keep_h],
        filled=missing[keep].cpu().numpy(),
        dropped=starts[present_h & ~keep_h],
        step_s=step_s,
    )


def run_series(
    source: Any,
    out: str | Path,
    *,
    column: str | int | None = None,
    time_column: str | int | None = None,
    window: str = "1d",
    pointwise: bool = False,
    settings: LearnSettings | None = None,
    hidden: int = 32,
    device: str | torch.device = "auto",
    progress: Progress | None = None,
    epoch_progress: Callable[[int, float, float], None] | None = None,
) -> LearnResult:
    """Windows of a load series, MinMax scaling, the MLP autoencoder, anomalous windows.

    Duplicate timestamps are averaged and gaps filled (up to two steps per window) or the
    window dropped, all reported in ``summary.json``. ``pointwise`` trains the notebook's
    per-sample autoencoder (input size 1) instead and scores each window by the mean error
    of its samples. Writes ``summary.json`` (last), ``embeddings.parquet`` (window start,
    latent code, score, flag, spread), ``checkpoint.pt`` (or ``ensemble.pt``),
    ``history.csv`` and figures (``training.png``, ``latent.png``, ``extremes.png``,
    ``days.png``).
    """
    from devicepipe.models import MLPAutoencoder, MLPAutoencoderConfig  # noqa: PLC0415
    from devicepipe.scale import MinMaxScaler  # noqa: PLC0415
    from devicepipe.score import reconstruct, score  # noqa: PLC0415
    from devicepipe.train import split_indices  # noqa: PLC0415
    from devicepipe.units import parse_duration  # noqa: PLC0415

    settings = settings or LearnSettings(latent=8, lr=1e-3, batch_size=64, epochs=200)
    settings.check()
    window_s = parse_duration(window)
    note = progress or (lambda _m: None)
    out = check_output_dir(out)
    if settings.resume and not (out / "checkpoint.pt").exists():
        raise DevicepipeError(f"nothing to resume: {out / 'checkpoint.pt'} does not exist.")
    if time_column is None:
        raise DevicepipeError("a load series needs its time column: pass --time-column (e.g. Datetime).")
    dev = resolve_device(device)
    with count_transfers() as ledger:
        timer = StageTimer(dev)
        with timer.stage("read"):
            rec = read_series(source, column, device=dev, time_column=time_column, duplicates="mean")
        if rec.samples.ndim != 1:
            raise DevicepipeError(f"{rec.source} has {rec.n_channels} value columns; choose one with --column.")
        report = rec.time_report
        note(f"read {rec.n_samples:,} rows; {report.summary()}")
        with timer.stage("window"):
            wins = make_windows(rec.samples, rec.timestamps, window_s=window_s, step_s=report.step_s)
        if wins.values.shape[0] < 10:
            raise DevicepipeError(f"only {wins.values.shape[0]} complete windows of {window}; need at least 10.")
        with timer.stage("scale"):
            scaler = MinMaxScaler().fit(wins.values.reshape(-1))
            data = scaler.transform(wins.values.reshape(-1)).reshape(wins.values.shape)
        per = data.shape[1]
        train_data = data.reshape(-1, 1) if pointwise else data
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").unlink(missing_ok=True)

        def make_model(seed: int) -> torch.nn.Module:
            torch.manual_seed(seed)
            cfg = MLPAutoencoderConfig(input=1 if pointwise else per, hidden=hidden, latent=settings.latent)
            return MLPAutoencoder(cfg).to(dev)

        note(f"training on {train_data.shape[0]:,} {'samples' if pointwise else 'windows'} of {per} steps")
        with timer.stage("train"):
            models, histories = _train(
                make_model,
                train_data,
                settings,
                out,
                {"scaler": scaler.state_dict(), "window_s": window_s},
                epoch_progress,
            )
        with timer.stage("score"):
            train_rows, _ = split_indices(train_data.shape[0], settings.val_fraction, settings.seed, dev)
            if pointwise:
                per_sample = score(models, train_data, train_rows=train_rows, percentile=settings.percentile)
                window_scores = per_sample.scores.view(-1, per).mean(1)
                spread = per_sample.spread.view(-1, per).mean(1)
                threshold = float(torch.quantile(window_scores.double(), settings.percentile / 100))
                embeddings = per_sample.embeddings.view(-1, per, per_sample.embeddings.shape[1]).mean(1)
                flags = window_scores > threshold
                recon = reconstruct(models[0], train_data).view(-1, per)
            else:
                s = score(models, data, train_rows=train_rows, percentile=settings.percentile)
                window_scores, spread, threshold, embeddings, flags = (
                    s.scores,
                    s.spread,
                    s.threshold,
                    s.embeddings,
                    s.flags,
                )
                recon = reconstruct(models[0], data)
            raw_recon = scaler.inverse_transform(recon.reshape(-1)).reshape(recon.shape)
        with timer.stage("transfer"):
            host = {
                k: v.detach().cpu().numpy()
                for k, v in {
                    "scores": window_scores,
                    "spread": spread,
                    "emb": embeddings,
                    "flags": flags,
                    "days": wins.values,
                    "recon": raw_recon,
                    "scaled": data,
                    "scaled_recon": recon,
                }.items()
            }
    with timer.stage("write"):
        files = _write_series_outputs(out, wins, host, histories, threshold, rec.channels[0], pointwise)
        order = np.argsort(host["scores"])[::-1]
        flagged = [i for i in order if host["flags"][i]]
        summary = {
            **_describe_input(source, rec, dev, channel_key="column"),
            "window": window,
            "steps_per_window": per,
            "pointwise": pointwise,
            "settings": {**settings.__dict__, "hidden": hidden},
            "time": report.to_dict(),
            "windows": {
                "used": int(wins.values.shape[0]),
                "filled_slots": int(wins.filled.sum()),
                "windows_with_filled_slots": int((wins.filled > 0).sum()),
                "dropped": [str(d)[:19] for d in wins.dropped],
            },
            "threshold": threshold,
            "flagged": [{"start": str(wins.starts[i])[:19], "score": float(host["scores"][i])} for i in flagged],
        }
    return _finish(out, summary, histories, timer, ledger, files)


def _write_series_outputs(
    out: Path,
    wins: Windows,
    host: dict[str, np.ndarray],
    histories: list[dict],
    threshold: float,
    unit_name: str,
    pointwise: bool,
) -> dict[str, Path]:
    from devicepipe.plot import plot_days, plot_extremes, plot_latent, plot_training, save_figure  # noqa: PLC0415

    files = _write_scores(out, {"start": wins.starts, "filled_slots": wins.filled}, host, histories)
    names = [str(s)[:10] for s in wins.starts]
    order = np.argsort(host["scores"])[::-1]
    flagged = np.array([i for i in order if host["flags"][i]], dtype=np.int64)
    unit = "MW" if "MW" in unit_name.upper() else "value"
    hours = np.arange(host["days"].shape[1]) * wins.step_s / 3600
    kind = "per-sample autoencoder" if pointwise else "autoencoder"
    figs = {
        "training.png": plot_training(histories, title=f"{kind} training on {len(names):,} windows"),
        "latent.png": plot_latent(
            host["emb"],
            scores=host["scores"],
            threshold=threshold,
            title="Window codes, coloured by reconstruction error",
        ),
        "extremes.png": plot_extremes(
            host["days"],
            host["recon"],
            host["scores"],
            names=names,
            title=f"Most and least anomalous windows ({unit}) with reconstructions",
            x=hours,
            xlabel="hours from the window's start",
        ),
        "days.png": plot_days(host["days"], flagged, names, unit=unit, hours=hours),
    }
    for name, fig in figs.items():
        files[name] = save_figure(fig, out / name)
    return files
