"""Learning for a run: its settings, the model(s) trained, and every row scored.

:class:`LearnSettings` holds what the ``ecg`` and ``series`` pipelines train and score with,
checks itself once when made, and owns its defaults (:class:`SeriesLearnSettings` those of
load series). :func:`train_models` trains one model (checkpointed every 10 s and at the end,
resumable) or a vmap ensemble (saved atomically when done); :func:`score_rows` scores every
row against the threshold taken from the training split; :func:`convergence_warning` says
when training ended while the model was still learning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from devicepipe.artifacts.names import CHECKPOINT_NAME, ENSEMBLE_NAME
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.threads import check_thread_count, requested_threads
from devicepipe.learning.ensemble import Ensemble, fit_ensemble, save_ensemble
from devicepipe.learning.score import Scores, score
from devicepipe.learning.train import History, distributed, fit, load_checkpoint, split_indices
from devicepipe.models import as_model
from devicepipe.scorers import DEFAULT_SCORER, SCORERS
from devicepipe.scorers.neighbours import MIN_EFFECT

__all__ = [
    "DEFAULT_SCORER",
    "ENSEMBLE_NAME",
    "LearnSettings",
    "SCORERS",
    "SCORES_AT_STAKE",
    "SeriesLearnSettings",
    "check_before_start",
    "convergence_warning",
    "kept_epoch",
    "learning_failed",
    "recent_fall",
    "score_rows",
    "train_models",
]


EpochCallback = Callable[[int, float, float], None]

#: Training that ends while its loss still falls by more than this share over its last epochs
#: (see :func:`recent_fall`) has not converged: more epochs would still change the model.
STILL_FALLING = 0.01


@dataclass(frozen=True)
class LearnSettings:
    """Training and scoring settings of a learning run (defaults: the ``ecg`` pipeline's VAE)."""

    epochs: int | None = None  # exactly this many passes; None: until learned (early stopping), at most max_epochs
    max_epochs: int = 200  # the most epochs early stopping may run
    patience: int = 20  # epochs without a better validation loss before stopping
    min_improvement: float = 1e-3  # relative decrease of the validation loss that counts as better
    batch_size: int = 256  # rows per optimiser step
    lr: float = 3e-3  # Adam's learning rate
    weight_decay: float = 0.0  # Adam's L2 penalty
    val_fraction: float = 0.1  # share of rows held out (seeded) for the validation loss
    seed: int = 0  # split, initialisation, batch order and sampling noise
    latent: int = 2  # latent (code) dimensions
    ensemble: int = 1  # members trained at once with torch.func.vmap (1: a single model)
    percentile: float = 99.0  # rows scoring above this percentile of the training rows are flagged
    min_effect: float = MIN_EFFECT  # and differing by at least this share of a typical row (local, multiscale)
    resume: bool = False  # continue the run directory's checkpoint
    tensorboard: str | None = None  # also log losses for TensorBoard here
    bf16: bool = False  # bfloat16 autocast (CUDA only)
    threads: int | None = None  # CPU threads for training and scoring (None: by the size of a step)
    scorer: str | None = None  # a row's score (see SCORERS); None: the pipeline's default (DEFAULT_SCORER)
    neighbours: int | None = None  # k of the nearest-neighbour scorer; None: from the share flagged

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise :class:`DevicepipeError` naming the first setting out of range (run when made)."""
        if min(self.epochs or 1, self.max_epochs, self.batch_size, self.latent, self.ensemble, self.patience) < 1:
            raise DevicepipeError(
                "epochs, maximum epochs, patience, batch size, latent size and ensemble size must all be at least 1."
            )
        if not 0 <= self.min_improvement < 1:
            raise DevicepipeError(f"minimum improvement {self.min_improvement} must be within [0, 1), e.g. 1e-3.")
        if self.epochs is None and self.val_fraction == 0:
            problem = "early stopping watches the validation loss: keep a validation fraction above 0"
            raise DevicepipeError(problem, fix="or pass {epochs=N}.", param="val_fraction", value=self.val_fraction)
        if not 0 < self.lr < 1:
            raise DevicepipeError(f"learning rate {self.lr} is out of range; use e.g. 1e-3.")
        if not 0 <= self.weight_decay < 1:  # (torch's own message had been "Invalid weight_decay value")
            raise DevicepipeError(f"weight decay {self.weight_decay} must be within [0, 1), e.g. 1e-4 (or 0: none).")
        if not 0 <= self.val_fraction < 0.9:
            raise DevicepipeError(f"validation fraction {self.val_fraction} must be within [0, 0.9).")
        if not 50 <= self.percentile < 100:
            raise DevicepipeError(f"anomaly percentile {self.percentile} must be within [50, 100).")
        if not 0 <= self.min_effect <= 1:
            raise DevicepipeError(f"least effect {self.min_effect} must be within [0, 1], e.g. 0.15.")
        if self.threads is not None:
            check_thread_count(self.threads)
        if self.scorer is not None and self.scorer not in SCORERS:
            raise DevicepipeError(
                f"{{param}} {self.scorer!r} is not one of {', '.join(SCORERS)}.",
                param="scorer",
                value=self.scorer,
            )
        if self.neighbours is not None and (isinstance(self.neighbours, bool) or self.neighbours < 1):
            raise DevicepipeError(f"neighbours must be at least 1, got {self.neighbours}.")
        if self.resume and self.ensemble > 1:
            raise DevicepipeError(
                "{param} works for single models",
                fix="rerun the ensemble without {resume=True}.",
                param="resume",
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def early_stopping(self) -> bool:
        """Whether training stops when learned (no exact ``epochs`` given)."""
        return self.epochs is None

    @property
    def epoch_limit(self) -> int:
        """The most epochs training runs: ``epochs`` when given, else ``max_epochs``."""
        return self.max_epochs if self.epochs is None else self.epochs


@dataclass(frozen=True)
class SeriesLearnSettings(LearnSettings):
    """The ``series`` pipeline's defaults: the electricity notebook's MLP autoencoder on days."""

    max_epochs: int = 500
    batch_size: int = 64
    lr: float = 1e-3
    latent: int = 8


def check_before_start(out: Path, settings: LearnSettings, identity: dict[str, Any] | None = None) -> None:
    """Fail before any work when the run cannot go through: a thread count asked for that is
    not one, or ``settings.resume`` without a checkpoint in ``out``, with one trained for an
    exact number of epochs while these settings stop by themselves (it holds no stopping state),
    with one already past ``settings.epochs``, or with one of another run: ``identity`` (the
    input's fingerprint and the settings a resumed run must keep) differs from the one saved."""
    requested_threads(settings.threads)
    if not settings.resume:
        return
    if not (out / CHECKPOINT_NAME).exists():
        raise DevicepipeError(f"nothing to resume: {out / CHECKPOINT_NAME} does not exist.")
    checkpoint = load_checkpoint(out)
    if settings.early_stopping and "early_stopping" not in checkpoint:
        problem = f"the checkpoint in {out} was trained for an exact number of epochs"
        raise DevicepipeError(problem, fix="resume it with {epochs=N}.", param="epochs")
    done = int(checkpoint.get("epoch", 0))
    if settings.epochs is not None and settings.epochs < done:
        problem = f"the checkpoint in {out} has trained {done} epochs already, more than {settings.epochs}"
        raise DevicepipeError(
            problem, fix=f"resume to more epochs: {{epochs}} above {done}.", param="epochs", value=settings.epochs
        )
    saved = checkpoint.get("identity")
    if identity is not None and saved is not None:
        # every key either holds (a key given now and not then, or then and not now, differs), but
        # those a checkpoint of an older version never saved
        keys = [k for k in {**identity, **saved} if k in saved]
        changed = [
            f"{k} {saved.get(k)!r} then, {identity.get(k)!r} now" for k in keys if saved.get(k) != identity.get(k)
        ]
        if changed:
            raise DevicepipeError(
                f"cannot resume {out}: this is not the run it holds ({'; '.join(changed)}); resume with the same "
                "input and settings, or start a new run directory."
            )


def train_models(
    make_model: Callable[[int], nn.Module],
    data: torch.Tensor,
    settings: LearnSettings,
    out: Path | None,
    extra_state: dict[str, Any],
    progress: EpochCallback | None = None,
    stream: bool = False,
) -> tuple[list[nn.Module], list[dict[str, list[float]]]]:
    """Train one model (checkpointed in ``out``, resumable) or a vmap ensemble (saved to ``out``);
    ``out=None`` writes nothing; ``stream``: ``data`` stays in host memory, a batch at a time on the device.

    ``make_model(seed)`` returns a model on ``data``'s device initialised from ``seed``;
    ``extra_state`` (e.g. the scaler) is stored with the weights. Without an exact
    ``settings.epochs``, training stops when the validation loss stops improving and keeps
    the best epoch's weights. Returns the trained models and one history per model
    (``{"train", "val", "seconds"}`` per epoch, ``best_epoch``, ``stopped_early``).
    """
    common: dict[str, Any] = dict(
        epochs=settings.epoch_limit,
        batch_size=settings.batch_size,
        lr=settings.lr,
        weight_decay=settings.weight_decay,
        val_fraction=settings.val_fraction,
        patience=settings.patience if settings.early_stopping else None,
        min_improvement=settings.min_improvement,
        stream=stream,
    )
    if settings.ensemble > 1:
        rank, world = distributed()
        share = None if world == 1 else list(range(rank, settings.ensemble, world))
        if share == []:
            raise DevicepipeError(
                f"{world} processes for an ensemble of {settings.ensemble}: each process needs a member; "
                f"start at most {settings.ensemble} (torchrun --nproc-per-node {settings.ensemble})."
            )
        ens = fit_ensemble(
            make_model,
            data,
            members=settings.ensemble,
            seed=settings.seed,
            callback=progress,
            member_ids=share,
            **common,
        )
        if world > 1:  # every rank gets every member, in member order (no gradients were exchanged)
            ens = _gathered(ens, make_model, settings.ensemble, world)
        if out is not None and rank == 0:
            save_ensemble(ens, out / ENSEMBLE_NAME, extra_state)
        return ens.members, [h.to_dict() for h in ens.histories]
    model = make_model(settings.seed)
    if settings.resume and out is not None:
        state = load_checkpoint(out)
        if state.get("config") != as_model(model).config_dict():
            raise DevicepipeError(
                f"the checkpoint in {out} is for {state.get('config')}, not {as_model(model).config_dict()}; "
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


def _gathered(ens: Ensemble, make_model: Callable[[int], nn.Module], members: int, world: int) -> Ensemble:
    """The whole ensemble from each rank's share of it (member ``i`` trained on rank ``i % world``)."""
    import torch.distributed as dist  # noqa: PLC0415

    mine = [
        ({k: v.detach().cpu() for k, v in m.state_dict().items()}, h.to_dict(), s)
        for m, h, s in zip(ens.members, ens.histories, ens.seeds, strict=True)
    ]
    shares: list[Any] = [None] * world
    dist.all_gather_object(shares, mine)
    ordered = [shares[i % world][i // world] for i in range(members)]
    device = next(ens.members[0].parameters()).device
    models = []
    for state, _history, seed in ordered:
        model = make_model(seed)
        model.load_state_dict({k: v.to(device) for k, v in state.items()})
        models.append(model.eval())
    return Ensemble(models, [History.from_dict(h) for _s, h, _seed in ordered], [seed for *_x, seed in ordered])


def score_rows(models: list[nn.Module], data: torch.Tensor, settings: LearnSettings) -> Scores:
    """Score every row of ``data`` with the trained ``models``; the threshold is ``settings.percentile``
    of the training split's scores (the split ``fit`` used, so validation rows do not set it)."""
    train_rows, _ = split_indices(data.shape[0], settings.val_fraction, settings.seed, data.device)
    return score(models, data, train_rows=train_rows, percentile=settings.percentile)


def recent_fall(losses: list[float], *, share: float = 0.2, least: int = 3) -> float:
    """How much the loss still fell at the end of training, relative to where it stood before.

    With ``n`` epochs and a window of the last ``w = max(least, share * n)`` of them: ``(best
    before the window - best in it) / best before``; 0 or less when the end brought nothing.
    A run of fewer epochs than ``w + 1`` compares with its first epoch; one epoch alone
    returns ``inf`` (nothing says it has learned).
    """
    values = np.asarray(losses, dtype=np.float64)
    if values.size < 2:
        return float("inf")
    w = min(max(least, int(share * values.size)), values.size - 1)
    before, after = float(np.min(values[:-w])), float(np.min(values[-w:]))
    return (before - after) / abs(before) if before else 0.0


#: What an unsettled model makes unreliable when the scores depend on it.
SCORES_AT_STAKE = "its scores and flags"


def convergence_warning(histories: list[dict[str, Any]], at_stake: str = SCORES_AT_STAKE) -> str | None:
    """A sentence for the summary, the terminal and the figures when a model was still learning
    when training ended (its validation loss, or the training loss without one, fell by more than
    1 % over its last epochs, by :func:`recent_fall`); None when every model stopped by itself
    or had levelled off. ``at_stake``: what of the run is not yet reliable (its scores and flags,
    or only its figures of the model where the scores do not use it)."""
    worst: tuple[float, int, int] | None = None
    for h in histories:
        if h.get("stopped_early") or h.get("diverged"):  # stopped by itself, or failed (learning_failed)
            continue
        val = [v for v in h.get("val", []) if np.isfinite(v)]
        losses = val if len(val) == len(h["train"]) else h["train"]
        fall = recent_fall(losses)
        if fall > STILL_FALLING and (worst is None or fall > worst[0]):
            window = min(max(3, int(0.2 * len(losses))), max(len(losses) - 1, 1))
            worst = (fall, window, len(losses))
    if worst is None:
        return None
    fall, window, n = worst
    how = "after one epoch" if n < 2 else f"its loss still fell by {100 * fall:.0f} % over the last {window} epochs"
    return (
        f"not converged: training ended at epoch {n} while the model was still learning ({how}), "
        f"so {at_stake} are not yet reliable; train longer, or let training stop by itself"
    )


#: Losses whose relative spread over a run's last epochs is under this did not change at all:
#: with shuffled batches a model that still updates moves its training loss by far more.
STUCK = 1e-6
#: A latent dimension whose spread over the rows is under this share of the widest one's is constant.
CONSTANT_DIMENSION = 1e-4


def stuck_loss(losses: list[float], *, share: float = 0.2, least: int = 3) -> bool:
    """Whether the loss did not change at all over the last ``max(least, share * n)`` epochs (and
    there were more epochs than that): the model's weights stopped moving."""
    values = np.asarray(losses, dtype=np.float64)
    w = max(least, int(share * values.size))
    if values.size <= w or not np.all(np.isfinite(values[-w:])):
        return False
    last = values[-w:]
    return float(last.max() - last.min()) <= STUCK * max(abs(float(np.median(last))), 1e-12)


#: A kept model whose loss is this many times its untrained loss (or the lowest of its run) got worse
#: by an order of magnitude or more: its training diverged. Healthy training ends far below both.
GREW = 10.0


def learning_failed(
    histories: list[dict[str, Any]], embeddings: torch.Tensor | None = None, at_stake: str = SCORES_AT_STAKE
) -> str | None:
    """A sentence when training produced a broken model; None otherwise. Broken: a loss that became
    NaN or infinite (training stopped there and the weights before were kept), a kept model whose
    loss grew by an order of magnitude or more (over the untrained model's, or over the lowest of
    its run), a loss that stopped changing entirely (its units saturated or died), or a latent space
    most of whose dimensions are constant over the ``embeddings`` ``(n, latent)``. Such a model is
    not "converged", whatever its loss curve's slope. ``at_stake`` as :func:`convergence_warning`'s."""
    said = [s for s in (_diverged(histories), _grew(histories)) if s]
    stuck = [i for i, h in enumerate(histories) if stuck_loss(h["train"])]
    if stuck:
        h = histories[stuck[0]]
        said.append(
            f"the training loss has not changed at all since epoch {_stuck_since(h['train'])} "
            f"(it stays at {h['train'][-1]:.6g}), so the model stopped learning"
        )
    if embeddings is not None and embeddings.ndim == 2 and embeddings.shape[0] > 1 and embeddings.shape[1] > 1:
        spread = embeddings.detach().float().std(0).cpu()
        constant = int((spread <= CONSTANT_DIMENSION * float(spread.max())).sum())
        if constant * 2 > embeddings.shape[1] or not float(spread.max()) > 0.0:
            said.append(f"{constant} of its {embeddings.shape[1]} latent dimensions are constant over the rows")
    if not said:
        return None
    return (
        f"the model did not learn: {'; '.join(said)}. {at_stake[0].upper()}{at_stake[1:]} mean little; "
        "most often a learning rate too high does this: lower --lr and train again"
    )


def kept_epoch(history: dict[str, Any]) -> int:
    """The epoch (from 1; 0: the untrained weights) whose weights a model trained with ``history`` has."""
    best = history.get("best_epoch")
    return len(history["train"]) if best is None else int(best)


def _member(histories: list[dict[str, Any]], i: int) -> str:
    return "" if len(histories) == 1 else f" (ensemble member {i})"


def _diverged(histories: list[dict[str, Any]]) -> str | None:
    """What a loss that became NaN or infinite did, in words (the first member it happened to)."""
    for i, h in enumerate(histories):
        if h.get("diverged"):
            kept = kept_epoch(h)
            weights = f"epoch {kept}'s weights are kept" if kept else "the untrained weights are kept"
            at = f"epoch {len(h['train'])}{_member(histories, i)}"
            return f"its loss became {_last_bad(h)} at {at}, so training stopped ({weights})"
    return None


def _last_bad(h: dict[str, Any]) -> str:
    for v in (h["train"][-1], *h.get("val", [])[-1:]):
        if v is None or not np.isfinite(v):
            return "NaN" if v is None or np.isnan(v) else "infinite"
    return "NaN"


def _losses(values: list[float | None]) -> np.ndarray:
    return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)


def _grew(histories: list[dict[str, Any]]) -> str | None:
    """What a kept model whose loss grew by an order of magnitude or more did, in words: its loss
    against the untrained model's (``initial``) and against the lowest of its run."""
    for i, h in enumerate(histories):
        kept = kept_epoch(h)
        if kept < 1:
            continue
        val = _losses(h.get("val", [])[:kept])
        losses, which = (
            (val, "validation")
            if val.size == kept and np.all(np.isfinite(val))
            else (_losses(h["train"][:kept]), "training")
        )
        at, lowest, start = float(losses[-1]), float(np.nanmin(losses)), h.get("initial")
        who = _member(histories, i)
        if start is not None and np.isfinite(start) and start > 0 and at >= GREW * start:
            return f"its {which} loss grew from {start:.3g} untrained to {at:.3g} at the epoch kept ({kept}){who}"
        if lowest > 0 and at >= GREW * lowest:
            return f"its {which} loss grew from {lowest:.3g} to {at:.3g} at the epoch kept ({kept}){who}"
    return None


def _stuck_since(losses: list[float]) -> int:
    """The epoch (from 1) from which ``losses`` stayed at their last value."""
    values = np.asarray(losses, dtype=np.float64)
    last = values[-1]
    same = np.abs(values - last) <= STUCK * max(abs(last), 1e-12)
    k = values.size
    while k > 1 and same[k - 2]:
        k -= 1
    return k
