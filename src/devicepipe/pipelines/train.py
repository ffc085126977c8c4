"""``run_train``: one model of normal beats trained on many recordings."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from devicepipe.artifacts import Made, ScoredRows, write_artifacts
from devicepipe.artifacts.summaries import RunSummary
from devicepipe.core.datasets import is_dataset
from devicepipe.core.device import free_memory
from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import (
    Beats,
    beat_quality,
    ecg_segment,
)
from devicepipe.ecg.segment import SegmentMode
from devicepipe.io import (
    Recording,
)
from devicepipe.io.discover import INDEX_NAME, find_recordings
from devicepipe.io.timeline import NanPolicy
from devicepipe.io.write import holds_output
from devicepipe.learning.learn import (
    LearnSettings,
    check_before_start,
)
from devicepipe.learning.train import distributed, distributed_summary
from devicepipe.models import LightVAEConfig
from devicepipe.pipelines.context import (
    BEAT_WIDTH,
    ECG_MODE,
    MIN_BEATS_TO_TRAIN,
    PEAK_METHOD,
    EpochProgress,
    Progress,
    Run,
    start,
)
from devicepipe.pipelines.learning import Learned, beat_geometry, beat_rows, finish, learn, make_detector, model_rows
from devicepipe.pipelines.quality import check_min_quality
from devicepipe.pipelines.reading import find_peaks, first_lead, no_beats, read_ecg, signal_choice
from devicepipe.pipelines.results import LearnResult


@dataclass(frozen=True)
class _Source:
    """One recording of a training population, and its R peaks when a ``beats`` run found them."""

    path: Path
    peaks_file: Path | None = None  # the beats.parquet of a dataset ``beats`` run


def _population(spec: str | Path, out: Path) -> tuple[list[_Source], str]:
    """The recordings a ``train`` input names: a dataset directory of a ``beats`` run (each
    recording with its ``beats.parquet``), or a folder, glob, list or single recording."""
    path = Path(spec)
    index = path / INDEX_NAME
    if path.is_dir() and index.is_file():
        table = pq.read_table(index, columns=["path", "run", "status"]).to_pylist()
        sources = [
            _Source(Path(r["path"]), path / r["run"] / "beats.parquet")
            for r in table
            if r["status"] == "ok" and (path / r["run"] / "beats.parquet").is_file()
        ]
        if not sources:
            raise DevicepipeError(f"{index} lists no complete recording with a beats.parquet; run 'beats' on it first.")
        return sources, f"the beats of dataset run {path}"
    if is_dataset(spec):
        found = find_recordings(spec, exclude=out)
        n = len(found.paths)
        return [_Source(p) for p in found.paths], f"{n} recording{'s' if n != 1 else ''} of {spec}"
    return [_Source(path)], str(spec)


def _population_identity(sources: list[_Source], settings: LearnSettings, **choices: Any) -> dict[str, Any]:
    """What a resumed ``train`` must share with its checkpoint: the recordings (by path, size and
    modification time, not content: a population may be large) and the settings."""
    digest = hashlib.sha256()
    for src in sources:
        for file in (src.path, src.peaks_file):
            if file is not None and file.exists():
                stat = file.stat()
                digest.update(f"{file.resolve()}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    kept = {k: getattr(settings, k) for k in ("seed", "batch_size", "lr", "latent", "ensemble", "weight_decay")}
    return {"input": digest.hexdigest()[:16], **kept, **choices}


def _stored_peaks(file: Path, device: torch.device) -> torch.Tensor:
    """The R peaks a ``beats`` run wrote to ``file`` (its ``peak`` column), on ``device``."""
    try:
        peaks = pq.read_table(file, columns=["peak"]).column("peak").to_numpy()
    except (OSError, KeyError, pa.ArrowException) as exc:
        raise DevicepipeError(f"cannot read the R peaks in {file} ({str(exc).splitlines()[0]}).") from None
    return torch.from_numpy(np.ascontiguousarray(peaks, dtype=np.int64)).to(device)


#: Why ``train`` scores by the reconstruction error unless told otherwise.
POPULATION_SCORER_WHY = (
    "the default of a model for other recordings: a new recording's normal beats lie farther from the training "
    "beats than those lie from the beats of their own recordings, so distances to the training beats flag too "
    "many of a new recording's beats; the reconstruction error does not depend on that"
)


@holds_output
def run_train(
    source: str | Path,
    out: str | Path,
    *,
    settings: LearnSettings | None = None,
    channel: str | int | None = None,
    sampling_rate: float | None = None,
    device: str | torch.device = "auto",
    mode: SegmentMode = ECG_MODE,
    width: int = BEAT_WIDTH,
    method: str = PEAK_METHOD,
    nan: NanPolicy = "error",
    encoding: str | None = None,
    progress: Progress | None = None,
    recording_progress: Callable[[int, int], None] | None = None,
    epoch_progress: EpochProgress | None = None,
    count_transfers: bool = True,
    memory_budget: int | None = None,
    min_quality: float | None = None,
) -> LearnResult:
    """Train one beat model on the beats of many recordings: a population's model of normal.

    ``source`` is a folder, glob or list of ECG recordings (beats found as ``ecg`` finds
    them), or the directory of a dataset ``beats`` run (its recordings with the R peaks it
    wrote, so nothing is detected twice). Each recording's beats are cut, resampled to
    ``width`` and standardised by their own mean and deviation (gains and units differ
    between recordings), then all train one VAE (or ensemble) on the device; a recording that
    cannot be read is left out and named in the summary. ``recording_progress(done, total)``
    after each recording. Under ``torchrun`` each process trains its share of every batch
    (DistributedDataParallel); rank 0 writes. Beats beyond ``memory_budget`` bytes (default: a
    quarter of the device's free memory) are held in host memory and streamed to the device a
    batch at a time, with the same result. ``min_quality`` (a correlation in [-1, 1]) leaves out
    of training each recording's beats in stretches of poor signal
    (:meth:`devicepipe.ecg.BeatQuality.in_good_signal`); a recording with none above it is left out.

    Writes to ``out``: ``model.pt`` (what ``score`` takes), ``checkpoint.pt`` (or
    ``ensemble.pt``), ``recordings.parquet`` (per recording: beats trained on, poor beats left
    out, flagged, median score),
    ``history.csv``, ``training.png``, ``latent.png``, ``scores.png``, ``report.html``, and
    ``summary.json`` last.
    """
    settings = settings or LearnSettings()
    vae = LightVAEConfig(width=width, latent=settings.latent)
    check_min_quality(min_quality)
    run = start(out, device, count_transfers, progress)
    sources, described = _population(source, run.out)
    choices = dict(channel=channel, sampling_rate=sampling_rate, method=method, mode=mode, width=width, nan=nan)
    if min_quality is not None:
        choices["min_quality"] = min_quality
    identity = _population_identity(sources, settings, **choices)
    check_before_start(run.out, settings, identity)
    run.note(f"cutting the beats of {described}")
    cut = _Cut(channel, sampling_rate, nan, encoding, method, mode, width, min_quality)
    budget = memory_budget if memory_budget is not None else free_memory(run.device) // 4
    pop = _gather(run, sources, described, cut, budget, recording_progress)
    # a model for other recordings scores by its reconstruction error: a new recording's normal
    # beats lie farther from the training beats than those lie from their own recordings' beats,
    # so distances to the training beats flag too many of them (tests/cli/test_models.py)
    detector = make_detector(
        settings, run.device, scorer="reconstruction", model="vae", width=vae.width, scaling="none"
    )
    about = f"{pop.n_beats:,} beats of {len(pop.used)} recordings"
    learned = learn(run, detector, pop.data, settings, {"identity": identity}, epoch_progress, about)
    if distributed()[0] != 0:  # rank 0 writes the run; the others only trained their share
        return LearnResult(run.out, RunSummary(extra={"rank": distributed()[0]}), {})
    with run.stage("transfer"):
        rows = replace(learned.scores.to_host(), train_scores=detector.train_scores_.detach().cpu().numpy())
    bounds = np.cumsum([0] + [u["beats"] for u in pop.used])
    for u, a, b in zip(pop.used, bounds[:-1], bounds[1:], strict=True):
        u["flagged"] = int(rows.flags[a:b].sum())
        u["median_score"] = float(np.median(rows.scores[a:b]))
    with run.stage("write"):
        files = _write_train(run, learned, rows, pop, beat_geometry(pop.geometry_beats, method, width))
    summary = _train_summary(source, run, settings, cut, pop, rows, learned)
    return finish(run, summary, learned, files, "train", None)


@dataclass(frozen=True)
class _Cut:
    """How each recording of a population is read and its beats cut into rows."""

    channel: str | int | None
    sampling_rate: float | None
    nan: NanPolicy
    encoding: str | None
    method: str
    mode: SegmentMode
    width: int
    min_quality: float | None


@dataclass
class _Gathered:
    """A population's training rows ``(n_beats, width)`` (on the device, or in host memory to be
    streamed), what each recording gave or why it was left out, and how they were held."""

    data: torch.Tensor
    used: list[dict[str, Any]]  # per recording: path, beats, poor_left_out, rate_hz (then flagged, median_score)
    skipped: list[dict[str, str]]  # per recording left out: path, error
    window_s: float | None
    geometry_beats: Beats  # the last recording's beats: how rows were cut, for the model file
    streamed: dict[str, Any]  # from_host, bytes, budget_bytes
    described: str  # the population in words

    @property
    def n_beats(self) -> int:
        return sum(u["beats"] for u in self.used)


def _recording_rows(run: Run, src: _Source, cut: _Cut) -> tuple[torch.Tensor, int, Recording, Beats]:
    """One recording's rows (its usable beats, resampled and standardised), how many poor beats
    were left out, the recording and its beats."""
    chosen = signal_choice(run, str(src.path), cut.channel)
    rec = read_ecg(run, str(src.path), chosen, cut.sampling_rate, cut.nan, cut.encoding)
    with run.stage("detect"):
        peaks = (
            find_peaks(rec, cut.method, cut.channel)
            if src.peaks_file is None
            else _stored_peaks(src.peaks_file, run.device)
        )
    rec, _ = first_lead(rec)
    with run.stage("segment"):
        beats = ecg_segment(rec.samples, peaks, rec.fs, mode=cut.mode)
    if beats.matrix.shape[0] == 0:
        raise no_beats(rec, peaks)
    left_out = 0
    if cut.min_quality is not None:
        with run.stage("segment"):
            usable = beat_quality(beats).in_good_signal(cut.min_quality)
        left_out = int((~usable).sum())
        if left_out == usable.numel():
            raise DevicepipeError(
                f"no beat of {rec.source} reaches {{param}} {cut.min_quality:g}",
                fix="lower {min_quality}",
                param="min_quality",
                value=cut.min_quality,
            )
    with run.stage("scale"):
        rows = beat_rows(model_rows(beats, rec.samples, cut.width), cut.width)
        if left_out:
            rows = rows[usable]
    return rows, left_out, rec, beats


def _gather(
    run: Run,
    sources: list[_Source],
    described: str,
    cut: _Cut,
    budget: int,
    recording_progress: Callable[[int, int], None] | None,
) -> _Gathered:
    """Every recording's rows, held on the device until they pass ``budget`` bytes and in host
    memory from then on (streamed to the device a batch at a time); a recording that fails is left
    out and named, unless it is the only one. Refuses too few beats to train."""
    parts: list[torch.Tensor] = []
    used: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    window_s: float | None = None
    geometry_beats: Beats | None = None
    held, stream = 0, False
    for i, src in enumerate(sources):
        try:
            rows, left_out, rec, beats = _recording_rows(run, src, cut)
            held += rows.numel() * rows.element_size()
            if held > budget and not stream:  # from here on the beats wait in host memory
                stream = True
                run.note(f"the beats pass the memory budget ({held:,} bytes): held in host memory, streamed")
                parts = [p.cpu() for p in parts]
            parts.append(rows.cpu() if stream else rows)
            used.append(
                {
                    "path": str(src.path),
                    "beats": int(rows.shape[0]),
                    "poor_left_out": left_out,
                    "rate_hz": rec.sampling_rate,
                }
            )
            window_s, geometry_beats = beats.window_s, beats
        except DevicepipeError as exc:
            if len(sources) == 1:
                raise  # one recording named: its own error, as every command gives it
            skipped.append({"path": str(src.path), "error": exc.cli_message.rstrip(".")})
        if recording_progress is not None:
            recording_progress(i + 1, len(sources))
    n_beats = sum(u["beats"] for u in used)
    if n_beats < MIN_BEATS_TO_TRAIN:
        first = f"; the first failure: {skipped[0]['path']}: {skipped[0]['error']}" if skipped else ""
        raise DevicepipeError(
            f"only {n_beats} beats were cut from {described}; at least {MIN_BEATS_TO_TRAIN} are needed to train{first}."
        )
    data = torch.cat(parts)
    del parts
    if stream and run.device.type == "cuda":
        data = data.pin_memory()  # copies of pinned memory to the GPU are faster and can overlap
    streamed = {"from_host": stream, "bytes": held, "budget_bytes": budget}
    assert geometry_beats is not None  # (at least one recording gave beats: checked above)
    return _Gathered(data, used, skipped, window_s, geometry_beats, streamed, described)


def _write_train(
    run: Run, learned: Learned, rows: ScoredRows, pop: _Gathered, geometry: dict[str, Any]
) -> dict[str, Path]:
    """The model, ``recordings.parquet``, the scores and the figures of a population's run."""
    used = pop.used
    counts = np.diff(np.cumsum([0] + [u["beats"] for u in used]))
    made = Made(
        "train", run.out, rows, histories=learned.histories, threshold=learned.scores.threshold,
        warning=learned.unsettled, leading={"recording": np.repeat(np.arange(len(used)), counts)},
        n_recordings=len(used), recordings=used, detector=learned.detector, geometry=geometry,
    )  # fmt: skip
    return write_artifacts(made)


def _train_summary(
    source: str | Path,
    run: Run,
    settings: LearnSettings,
    cut: _Cut,
    pop: _Gathered,
    rows: ScoredRows,
    learned: Learned,
) -> dict[str, Any]:
    """``summary.json`` of a population's run (before :func:`finish` adds the training's part)."""
    detector, skipped = learned.detector, pop.skipped
    summary = {
        "input": str(source),
        "device": str(run.device),
        "recordings": {"used": len(pop.used), "skipped": skipped, "described": pop.described},
        "settings": {**settings.to_dict(), "mode": cut.mode, "width": cut.width, "method": cut.method},
        "counts": {"beats": pop.n_beats, "flagged": int(rows.flags.sum())},
        "window_s": pop.window_s,
        "threshold": learned.scores.threshold,
        "threshold_means": (
            f"{detector.threshold_rule}; "
            + detector.score_meaning("a beat standardised by its own recording's beats", "standard deviations")
        ),
        "scorer": detector.scorer_summary(None if settings.scorer else POPULATION_SCORER_WHY),
        "distributed": distributed_summary(),
        "streamed": pop.streamed,
        "warnings": [f"{len(skipped)} recording(s) left out (see recordings.skipped in summary.json)"]
        if skipped
        else [],
    }
    if cut.min_quality is not None:
        summary["quality"] = {
            "measure": "correlation with the recording's typical beat; stretch: its median over 10 s",
            "min_quality": cut.min_quality,
            "left_out_of_training": sum(u["poor_left_out"] for u in pop.used),
        }
    return summary
