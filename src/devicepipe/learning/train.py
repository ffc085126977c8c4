"""Training on the device: on-device shuffling, per-epoch history, atomic checkpoints, exact resume.

Batches are delivered by an on-device permutation and index slicing (a ``DataLoader`` over
in-memory tensors costs about 1 s per epoch just to deliver 91 k beats on a 2-core CPU; this
costs a few milliseconds). Every random number of an epoch (the batch order and the VAE's
sampling noise) comes from a generator on the data's device seeded by ``(seed, epoch)``, so a
run resumed from a checkpoint continues exactly as an uninterrupted run would, and an
ensemble member trained inside ``torch.func.vmap`` sees the same numbers as when trained alone.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from devicepipe.artifacts.names import CHECKPOINT_NAME
from devicepipe.core.device import all_finite, full_float32
from devicepipe.core.errors import DevicepipeError
from devicepipe.io.write import write_torch
from devicepipe.models import as_model, model_rows

__all__ = [
    "EarlyStopping",
    "EpochNoise",
    "History",
    "PerRowLoss",
    "adam",
    "check_finite_rows",
    "distributed",
    "distributed_summary",
    "epoch_noise",
    "fit",
    "load_checkpoint",
    "split_indices",
    "start_distributed",
]


@dataclass
class History:
    """Mean loss per row, per epoch; with early stopping, the epoch whose weights were kept."""

    train: list[float] = field(default_factory=list)
    val: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    best_epoch: int | None = None  # 1-based; None when every epoch ran and the last weights were kept
    stopped_early: bool = False
    #: The validation loss (the training loss without validation rows) of the untrained model.
    initial: float | None = None
    #: Set when the loss became NaN or infinite: training stopped there and the weights of the
    #: epoch before (``best_epoch``, 0 for the untrained ones) were kept.
    diverged: bool = False

    def add(self, train: float, val: float, seconds: float) -> None:
        """Record one epoch: its mean train and validation losses per row, its seconds."""
        self.train.append(train)
        self.val.append(val)
        self.seconds.append(seconds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "train": list(self.train),
            "val": list(self.val),
            "seconds": list(self.seconds),
            "best_epoch": self.best_epoch,
            "stopped_early": self.stopped_early,
            "initial": self.initial,
            "diverged": self.diverged,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> History:
        return cls(
            list(d.get("train", [])),
            list(d.get("val", [])),
            list(d.get("seconds", [])),
            d.get("best_epoch"),
            bool(d.get("stopped_early", False)),
            d.get("initial"),
            bool(d.get("diverged", False)),
        )


@dataclass
class EarlyStopping:
    """Stop when the validation loss has not improved for ``patience`` epochs; keep the best weights.

    An epoch improves when its loss is below ``best - min_improvement * |best|`` (relative,
    so the same setting serves losses of any scale).
    """

    patience: int
    min_improvement: float = 1e-3
    best: float = math.inf
    best_epoch: int = 0  # 1-based; 0 before the first epoch
    since_best: int = 0

    def __post_init__(self) -> None:
        if self.patience < 1:
            raise DevicepipeError(f"early stopping needs a patience of at least 1 epoch, got {self.patience}.")
        if not 0 <= self.min_improvement < 1:
            raise DevicepipeError(f"min_improvement must be within [0, 1), got {self.min_improvement}.")

    def improved(self, val_loss: float, epoch: int) -> bool:
        """Record epoch ``epoch`` (1-based); True when it is the new best."""
        bar = self.best - self.min_improvement * abs(self.best) if math.isfinite(self.best) else math.inf
        if math.isfinite(val_loss) and val_loss < bar:
            self.best, self.best_epoch, self.since_best = val_loss, epoch, 0
            return True
        self.since_best += 1
        return False

    @property
    def done(self) -> bool:
        return self.since_best >= self.patience

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch, "since_best": self.since_best}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_epoch, self.since_best = state["best"], state["best_epoch"], state["since_best"]


@dataclass(frozen=True)
class EpochNoise:
    """One epoch's randomness: the batch order and one noise row per training row."""

    order: torch.Tensor  # int64 (n_train,)
    eps: torch.Tensor | None  # (n_train, latent) or None for deterministic models


def adam(params: list[torch.Tensor], *, lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam, with the fused kernel where every parameter allows it (floating, on the CPU or CUDA).

    The fused kernel updates all parameters in one pass: on the load MLP's batch-64 step it
    cut the optimizer's share from 0.26 to 0.10 ms (1 thread). The arithmetic is Adam's either way.
    """
    params = list(params)
    fused = all(p.dtype.is_floating_point and p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=fused or None)


def distributed() -> tuple[int, int]:
    """``(rank, world size)`` of this process in a ``torch.distributed`` group; ``(0, 1)`` outside one."""
    import torch.distributed as dist  # noqa: PLC0415 - only where asked for

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def distributed_summary() -> dict[str, Any] | None:
    """The process group this run trained in (backend, world size), None when it trained alone."""
    import torch.distributed as dist  # noqa: PLC0415

    rank, world = distributed()
    if world == 1:
        return None
    return {"backend": str(dist.get_backend()), "world_size": world, "how": "DistributedDataParallel"}


def start_distributed(device: str | torch.device = "auto") -> torch.device | None:
    """Join the process group ``torchrun`` describes (its ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``
    and ``MASTER_ADDR``/``MASTER_PORT`` environment), with NCCL for CUDA and gloo for the CPU.

    Returns this process's device (``cuda:LOCAL_RANK`` for CUDA), or None when not started by
    ``torchrun`` (no ``WORLD_SIZE`` above 1), when nothing is joined.
    """
    import os  # noqa: PLC0415

    import torch.distributed as dist  # noqa: PLC0415

    from devicepipe.core.device import resolve_device  # noqa: PLC0415

    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return None
    if dist.is_initialized():
        return resolve_device(device)
    local = int(os.environ.get("LOCAL_RANK", "0") or 0)
    dev = resolve_device(device)
    if dev.type == "cuda":
        if local >= torch.cuda.device_count():
            raise DevicepipeError(
                f"torchrun started {world} processes but this machine has {torch.cuda.device_count()} CUDA "
                f"device(s); pass --nproc-per-node {torch.cuda.device_count()} or fewer."
            )
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return dev


class PerRowLoss(nn.Module):
    """``forward`` is the wrapped model's per-row loss: what DistributedDataParallel calls and syncs,
    and what ``functional_call`` evaluates for a vmap ensemble (its parameters are named ``m.*``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.m = model

    def forward(self, x: torch.Tensor, eps: torch.Tensor | None) -> torch.Tensor:
        return as_model(self.m).losses(x, eps)


def _epoch_seed(seed: int, epoch: int) -> int:
    return (int(seed) * 1_000_003 + int(epoch) * 7919) % (2**63 - 1)


def epoch_noise(
    n_train: int, latent: int | None, *, seed: int, epoch: int, device: torch.device, dtype: torch.dtype = torch.float32
) -> EpochNoise:
    """The batch order and VAE noise of one epoch from ``(seed, epoch)``, placed on ``device``.

    Drawn by the CPU generator whatever the device (CUDA's generator gives other numbers for
    the same seed), so a run on a GPU sees the same order and noise as one on the CPU: a few MB
    per epoch copied, against the same answers on both."""
    gen = torch.Generator().manual_seed(_epoch_seed(seed, epoch))
    order = torch.randperm(n_train, generator=gen).to(device)
    eps = None if latent is None else torch.randn(n_train, latent, generator=gen).to(device=device, dtype=dtype)
    return EpochNoise(order, eps)


def split_indices(n: int, val_fraction: float, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded train/validation split of ``n`` rows (indices on ``device``; drawn on the CPU,
    so the split is the same whatever the device)."""
    if not 0 <= val_fraction < 1:
        raise DevicepipeError(f"fit(): val_fraction must be within [0, 1), got {val_fraction}.")
    gen = torch.Generator().manual_seed(_epoch_seed(seed, -1))
    perm = torch.randperm(n, generator=gen).to(device)
    n_val = int(round(n * val_fraction))
    if n - n_val < 1:
        raise DevicepipeError(f"fit(): {n} rows leave nothing to train on with val_fraction={val_fraction}.")
    return perm[n_val:].sort().values, perm[:n_val].sort().values


@full_float32()
@torch.no_grad()
def evaluate_loss(model: nn.Module, data: torch.Tensor, batch_size: int = 4096) -> float:
    """Mean loss per row in eval mode (the VAE uses its mean, no sampling)."""
    if data.shape[0] == 0:
        return float("nan")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total = torch.zeros((), dtype=torch.float64, device=device)
    for start in range(0, data.shape[0], batch_size):
        total += as_model(model).losses(data[start : start + batch_size].to(device)).sum().to(torch.float64)
    model.train(was_training)
    return float(total) / data.shape[0]


def load_checkpoint(run_dir: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The checkpoint of a run directory (raises a clear error when there is none)."""
    path = Path(run_dir) / CHECKPOINT_NAME
    if not path.exists():
        raise DevicepipeError(
            f"no checkpoint in {run_dir}: {CHECKPOINT_NAME} not found; resume a run directory "
            "written by 'devicepipe ecg' or 'devicepipe series'."
        )
    try:  # tensors and plain data only: a checkpoint from elsewhere must not run code
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DevicepipeError(
            f"cannot read checkpoint {path}: it holds more than tensors and plain data, or is damaged ({first})."
        ) from None


def check_finite_rows(data: torch.Tensor, caller: str) -> None:
    """A clear error when training rows hold NaN or inf (training on them can only end in NaN)."""
    if not all_finite(data):
        bad = ~torch.isfinite(data)
        first = int(torch.nonzero(bad.reshape(bad.shape[0], -1).any(1))[0])
        raise DevicepipeError(
            f"{caller}: the training rows hold {int(bad.sum()):,} non-finite value(s) (NaN or inf in the input), "
            f"the first in row {first:,}; drop or interpolate them before training."
        )


#: Seconds of training between checkpoint writes (and after the last epoch, always): a small
#: model's epoch can take a fifth of a second, and writing after each cost a demo 2.6 s of 36.
CHECKPOINT_EVERY_S = 10.0


@full_float32()
def fit(
    model: nn.Module,
    data: Any,
    *,
    epochs: int = 20,
    batch_size: int = 256,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    val_fraction: float = 0.1,
    seed: int = 0,
    split_seed: int | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    extra_state: dict[str, Any] | None = None,
    callback: Callable[[int, float, float], None] | None = None,
    tensorboard: str | Path | None = None,
    bf16: bool = False,
    patience: int | None = None,
    min_improvement: float = 1e-3,
    stream: bool = False,
    checkpoint_every_s: float | None = None,
) -> History:
    """Train ``model`` (already on ``data``'s device) with Adam; return the per-epoch history.

    Parameters
    ----------
    model : a :class:`devicepipe.models.Model` (``losses(x, eps)``, ``noise_dim``).
    data : rows of shape ``(n_rows, model.row_width)``: a tensor on the model's device, a
        :class:`devicepipe.ecg.Beats` (its ``matrix``), or anything ``to_torch`` takes.
    epochs, batch_size, lr, weight_decay : the usual; Adam. val_fraction : rows held out (seeded) to validate.
    seed : makes the split, the batch orders and the noise reproducible.
    split_seed : seed of the split alone (default: ``seed``): ensemble members share one split.
    checkpoint_dir : write ``checkpoint.pt`` there (atomically) after the last epoch, and after
        any epoch that ends ``checkpoint_every_s`` seconds (None: :data:`CHECKPOINT_EVERY_S`) or
        more after the last write: model, optimizer, epoch, model config, history, RNG states
        and ``extra_state`` (e.g. a scaler);
        with early stopping also its state and the best epoch's weights (``best_model``). A run
        killed between writes loses at most that long: its resume replays the epochs since.
    resume : continue ``checkpoint_dir``'s checkpoint, as an uninterrupted run (bit for bit on the CPU).
    callback : ``callback(epoch, train_loss, val_loss)`` after every epoch (1-based epoch).
    tensorboard : a TensorBoard log directory (needs ``tensorboard``). bf16 : bfloat16 autocast (CUDA only).
    patience : stop early when the validation loss has not improved (by ``min_improvement``,
        relative) for this many epochs, and end with the best epoch's weights; ``epochs`` is
        then a maximum. None: exactly ``epochs`` epochs, the last weights kept.
    stream : rows in host memory stay there, each batch copied to the model's device (rows that do
        not fit on it); order and noise are drawn on the device, so the result is the same.
    """
    device = next(model.parameters()).device
    _check_fit(epochs, batch_size, bf16, device)
    train, val = _split_rows(model, data, stream, val_fraction, seed if split_seed is None else split_seed)
    if patience is not None and val.shape[0] == 0:
        raise DevicepipeError("fit(): early stopping watches the validation loss; use val_fraction > 0.")
    stopper = None if patience is None else EarlyStopping(patience, min_improvement)
    optimizer = adam(list(model.parameters()), lr=lr, weight_decay=weight_decay)
    restored = _restore(checkpoint_dir, model, optimizer, stopper, device) if resume else None
    history, start_epoch, best_state = restored or (History(), 0, None)
    scalars = _Scalars(tensorboard)
    step_losses = _step_losses(model, device)
    fit_settings = {"batch_size": batch_size, "lr": lr, "weight_decay": weight_decay, "val_fraction": val_fraction}
    saves = _Checkpoints(checkpoint_dir, checkpoint_every_s, epochs, seed, fit_settings, extra_state)
    if history.initial is None:
        history.initial = evaluate_loss(model, val if val.shape[0] else train)
    try:
        for epoch in range(start_epoch, epochs):
            if stopper is not None and stopper.done:
                break  # (a resumed run that had already stopped)
            started = time.perf_counter()
            before = _state_copy(model)
            train_loss = _train_epoch(model, step_losses, optimizer, train, batch_size, bf16, seed, epoch)
            val_loss = evaluate_loss(model, val)
            history.add(train_loss, val_loss, time.perf_counter() - started)
            if not (math.isfinite(train_loss) and (val.shape[0] == 0 or math.isfinite(val_loss))):
                history.diverged, history.best_epoch = True, epoch  # the weights before this epoch
                model.load_state_dict(before)
                break
            if stopper is not None and stopper.improved(val_loss, epoch + 1):
                best_state = _state_copy(model)
            scalars.add(epoch + 1, train_loss, val_loss)
            saves.after(epoch + 1, model, optimizer, history, stopper, best_state)
            if callback is not None:
                callback(epoch + 1, train_loss, val_loss)
    finally:
        scalars.close()
    if stopper is not None and best_state is not None:
        model.load_state_dict(best_state)  # the weights of the best validation epoch
        history.best_epoch, history.stopped_early = stopper.best_epoch, stopper.done
    return history


def _split_rows(
    model: nn.Module, data: Any, stream: bool, val_fraction: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``data`` as the model's rows (see :func:`fit`), split (seeded) into training and validation rows."""
    device = next(model.parameters()).device
    data = model_rows(model, data, "fit()", host=stream)
    check_finite_rows(data, "fit()")
    train_idx, val_idx = split_indices(data.shape[0], val_fraction, seed, device)
    return data[train_idx.to(data.device)], data[val_idx.to(data.device)]


def _check_fit(epochs: int, batch_size: int, bf16: bool, device: torch.device) -> None:
    if epochs < 1 or batch_size < 1:
        raise DevicepipeError(f"fit(): epochs and batch_size must be positive, got {epochs} and {batch_size}.")
    if bf16 and device.type != "cuda":
        raise DevicepipeError(
            "bfloat16 autocast ({param}) is for CUDA devices",
            fix="drop {bf16=True} on the CPU.",
            param="bf16",
        )


def _step_losses(model: nn.Module, device: torch.device) -> Callable[..., torch.Tensor]:
    """The per-row losses of a training step: ``model.losses``, or under torch.distributed the
    model wrapped in DistributedDataParallel (each rank takes every world-th row of each batch;
    gradients are averaged across ranks)."""
    if distributed()[1] == 1:
        return as_model(model).losses
    from torch.nn.parallel import DistributedDataParallel  # noqa: PLC0415

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(PerRowLoss(model), device_ids=ids)


def _restore(
    checkpoint_dir: str | Path | None,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    stopper: EarlyStopping | None,
    device: torch.device,
) -> tuple[History, int, dict[str, Any] | None]:
    """Load ``checkpoint_dir``'s checkpoint into ``model``, ``optimizer`` and ``stopper``; return
    the history so far, the epochs done and the best epoch's weights (None without early stopping)."""
    if checkpoint_dir is None:
        raise DevicepipeError("fit(): resume needs checkpoint_dir.")
    state = load_checkpoint(checkpoint_dir, map_location=device)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    best_state = None
    if stopper is not None:
        if "early_stopping" not in state:
            raise DevicepipeError(
                "fit(): this checkpoint was trained for an exact number of epochs",
                fix="resume it with patience=None.",
            )
        stopper.load_state_dict(state["early_stopping"])
        best_state = state["best_model"]
    return History.from_dict(state["history"]), int(state["epoch"]), best_state


class _Scalars:
    """The losses of each epoch logged for TensorBoard in ``tensorboard`` (on rank 0), or nowhere."""

    def __init__(self, tensorboard: str | Path | None) -> None:
        self.writer = None
        if tensorboard is None or distributed()[0] != 0:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415 - optional dependency
        except ImportError:
            raise DevicepipeError(
                "TensorBoard logging needs the tensorboard package: pip install tensorboard."
            ) from None
        self.writer = SummaryWriter(str(tensorboard))

    def add(self, epoch: int, train: float, val: float) -> None:
        if self.writer is not None:
            self.writer.add_scalar("loss/train", train, epoch)
            self.writer.add_scalar("loss/val", val, epoch)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _train_epoch(
    model: nn.Module,
    step_losses: Callable[..., torch.Tensor],
    optimizer: torch.optim.Optimizer,
    train: torch.Tensor,
    batch_size: int,
    bf16: bool,
    seed: int,
    epoch: int,
) -> float:
    """One pass over ``train`` (rows, shape ``(n, width)``) in the order and with the noise of
    ``epoch`` (0-based) for ``seed`` (:func:`epoch_noise`); the mean loss per row.

    Under torch.distributed each rank takes every world-th row of each batch, its loss scaled so
    that the averaged gradient is the batch mean's; the total is summed over the ranks."""
    device = next(model.parameters()).device
    rank, world = distributed()
    noise_dim = as_model(model).noise_dim
    noise = epoch_noise(train.shape[0], noise_dim, seed=seed, epoch=epoch, device=device, dtype=train.dtype)
    model.train()
    total = torch.zeros((), dtype=torch.float64, device=device)
    for start in range(0, train.shape[0], batch_size):
        idx = noise.order[start : start + batch_size]
        eps = None if noise.eps is None else noise.eps[start : start + batch_size]
        n_batch = idx.shape[0]
        if world > 1:
            idx = idx[rank::world]
            eps = None if eps is None else eps[rank::world]
        rows = train[idx] if train.device == device else train[idx.to(train.device)].to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            losses = step_losses(rows, eps)
        loss = losses.float().mean() if world == 1 else losses.float().sum() * (world / n_batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total += losses.detach().sum().to(torch.float64)
    if world > 1:
        import torch.distributed as dist  # noqa: PLC0415

        dist.all_reduce(total)
    return float(total) / train.shape[0]


class _Checkpoints:
    """Writes ``checkpoint.pt`` into ``checkpoint_dir`` (none where it is None; on rank 0 alone)
    after the last epoch or an early stop, and after any epoch that ends ``every_s`` seconds
    (None: :data:`CHECKPOINT_EVERY_S`) or more after the last write."""

    def __init__(
        self,
        checkpoint_dir: str | Path | None,
        every_s: float | None,
        epochs: int,
        seed: int,
        fit_settings: dict[str, Any],
        extra_state: dict[str, Any] | None,
    ) -> None:
        self.path = None if checkpoint_dir is None else Path(checkpoint_dir) / CHECKPOINT_NAME
        self.every_s = CHECKPOINT_EVERY_S if every_s is None else every_s
        self.epochs, self.seed, self.fit_settings, self.extra = epochs, seed, fit_settings, extra_state or {}
        self.saved = time.perf_counter()

    def after(
        self,
        epoch: int,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        history: History,
        stopper: EarlyStopping | None,
        best_state: dict[str, Any] | None,
    ) -> None:
        """The checkpoint after ``epoch`` (1-based), where one is due."""
        last = epoch == self.epochs or (stopper is not None and stopper.done)
        due = last or time.perf_counter() - self.saved >= self.every_s
        if self.path is None or not due or distributed()[0] != 0:
            return
        self.saved = time.perf_counter()
        state = _checkpoint(model, optimizer, history, epoch, self.epochs, self.seed, self.fit_settings)
        write_torch({**state, **_stopping_state(stopper, best_state), **self.extra}, self.path)


def _state_copy(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``model``'s weights and buffers that later steps do not change (a clone of each
    tensor: ``copy.deepcopy`` of the ecg VAE's state dict took 1.8 ms against 0.2 ms, twice an epoch)."""
    return {name: t.detach().clone() for name, t in model.state_dict().items()}


def _checkpoint(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    history: History,
    epoch: int,
    epochs: int,
    seed: int,
    fit_settings: dict[str, Any],
) -> dict[str, Any]:
    """What ``checkpoint.pt`` holds after ``epoch`` epochs (see :func:`fit`)."""
    return {
        "model": _state_copy(model),
        "optimizer": optimizer.state_dict(),
        "epoch": epoch,
        "epochs": epochs,
        "model_kind": type(model).__name__,
        "config": as_model(model).config_dict(),
        "history": history.to_dict(),
        "seed": seed,
        "rng": {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        },
        "fit": fit_settings,
    }


def _stopping_state(stopper: EarlyStopping | None, best_state: dict[str, Any] | None) -> dict[str, Any]:
    """The checkpoint's early-stopping state and best epoch's weights, where there are any."""
    return {
        **({} if stopper is None else {"early_stopping": stopper.state_dict()}),
        **({} if best_state is None else {"best_model": best_state}),
    }
