"""Ensembles of same-shaped models trained and evaluated at once with ``torch.func``.

The members' parameters are stacked (``stack_module_state``), one loss is evaluated for all
of them with ``vmap`` over ``functional_call``, and one Adam steps the stacked parameters;
Adam works element by element, so this is the same arithmetic as N optimisers. Each member
keeps its own initialisation, batch order and sampling noise (from its own seed, exactly as
:func:`devicepipe.learning.train.fit` draws them), and all share one train/validation split, so
member ``i`` ends where ``fit(make_model(seeds[i]), data, seed=seeds[i], split_seed=seed)``
ends, within float tolerance.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from devicepipe.core.device import full_float32
from devicepipe.core.errors import DevicepipeError
from devicepipe.io.write import write_torch
from devicepipe.learning.train import (
    EarlyStopping,
    History,
    PerRowLoss,
    adam,
    check_finite_rows,
    epoch_noise,
    split_indices,
)
from devicepipe.models import as_model

__all__ = ["Ensemble", "fit_ensemble", "member_seeds", "save_ensemble"]

#: Validation rows evaluated at once (all members together).
VAL_BATCH = 4096


@dataclass
class Ensemble:
    """Trained members (ordinary modules, on the data's device) and their histories."""

    members: list[nn.Module]
    histories: list[History]
    seeds: list[int]


def member_seeds(seed: int, n: int) -> list[int]:
    """The seeds of ``n`` members of an ensemble seeded ``seed``."""
    return [seed * 1000 + i for i in range(n)]


@full_float32()
def fit_ensemble(
    make_model: Callable[[int], nn.Module],
    data: torch.Tensor,
    *,
    members: int = 5,
    epochs: int = 20,
    batch_size: int = 256,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    val_fraction: float = 0.1,
    seed: int = 0,
    callback: Callable[[int, float, float], None] | None = None,
    patience: int | None = None,
    min_improvement: float = 1e-3,
    member_ids: list[int] | None = None,
    stream: bool = False,
) -> Ensemble:
    """Train ``members`` models built by ``make_model(member_seed)`` on ``data`` at once.

    ``make_model`` must return the model on ``data``'s device, initialised from the seed it is
    given. Returns the trained members; ``callback(epoch, mean train loss, mean val loss)``.
    ``patience`` stops early as :func:`~devicepipe.learning.train.fit` does, member by member: a member
    whose patience has run out keeps its best weights (and they stay its result while the
    others go on), so each member ends as it would trained alone; the loop ends when every
    member is done or after ``epochs``.
    """
    if members < 1:
        raise DevicepipeError(f"fit_ensemble(): members must be at least 1, got {members}.")
    check_finite_rows(data, "fit_ensemble()")
    seeds = member_seeds(seed, members)
    if member_ids is not None:
        seeds = [seeds[i] for i in member_ids]
        members = len(seeds)
    models = _members(make_model, seeds, data, stream)
    device = next(models[0].parameters()).device
    wrapped = [PerRowLoss(m) for m in models]
    params, buffers = stack_module_state(wrapped)  # each (members, ...), leaves requiring grad
    base = copy.deepcopy(wrapped[0]).to("meta")
    train_idx, val_idx = split_indices(data.shape[0], val_fraction, seed, device)
    train, val = data[train_idx.to(data.device)], data[val_idx.to(data.device)]
    optimizer = adam(list(params.values()), lr=lr, weight_decay=weight_decay)
    latent = as_model(models[0]).noise_dim
    histories = [History() for _ in seeds]
    stoppers = None if patience is None else [EarlyStopping(patience, min_improvement) for _ in seeds]
    if stoppers is not None and val.shape[0] == 0:
        raise DevicepipeError("fit_ensemble(): early stopping watches the validation loss; use val_fraction > 0.")
    best = {k: v.detach().clone() for k, v in params.items()}  # each member's kept weights
    first = val if val.shape[0] else train[:VAL_BATCH]  # each untrained member's loss
    for h, loss in zip(histories, _val_sums(base, params, buffers, first, members, device).tolist(), strict=True):
        h.initial = loss / max(1, first.shape[0])
    dead: set[int] = set()  # members whose loss became NaN or infinite: they keep the weights before
    n = train.shape[0]
    for epoch in range(epochs):
        live = [i for i in range(members) if i not in dead and (stoppers is None or not stoppers[i].done)]
        if not live:
            break
        started = time.perf_counter()
        before = {k: v.detach().clone() for k, v in params.items()}
        noises = [epoch_noise(n, latent, seed=s, epoch=epoch, device=device, dtype=data.dtype) for s in seeds]
        totals = _train_epoch(base, params, buffers, optimizer, train, noises, batch_size, device)
        val_sum = _val_sums(base, params, buffers, val, members, device)
        elapsed = time.perf_counter() - started
        for i, h in enumerate(histories):
            if i in dead:
                continue
            h.train.append(float(totals[i]) / n)
            h.val.append(float(val_sum[i]) / max(1, val.shape[0]))
            h.seconds.append(elapsed)
            if not (math.isfinite(h.train[-1]) and (val.shape[0] == 0 or math.isfinite(h.val[-1]))):
                dead.add(i)
                h.diverged = True
                if stoppers is None:
                    h.best_epoch = epoch
                    for k, v in before.items():
                        best[k][i] = v[i]
                continue
            if stoppers is not None and not stoppers[i].done and stoppers[i].improved(h.val[-1], epoch + 1):
                for k, v in params.items():
                    best[k][i] = v[i].detach()
        if callback is not None and live:
            mean_val = sum(histories[i].val[-1] for i in live) / len(live)
            callback(epoch + 1, sum(histories[i].train[-1] for i in live) / len(live), mean_val)
    _load_kept(models, params, best, buffers, dead, stoppers, histories)
    return Ensemble(models, histories, seeds)


def _load_kept(
    models: list[nn.Module],
    params: dict[str, torch.Tensor],
    best: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    dead: set[int],
    stoppers: list[EarlyStopping] | None,
    histories: list[History],
) -> None:
    """Give each member its kept weights: the best epoch's with early stopping, those before the
    epoch its loss became NaN for a member in ``dead``, else the last; and its history's kept epoch."""
    for i, model in enumerate(models):
        kept = best if stoppers is not None or i in dead else params
        state = {k.removeprefix("m."): v[i].detach().clone() for k, v in {**kept, **buffers}.items()}
        model.load_state_dict(state, strict=False)
        model.eval()
        if stoppers is not None:
            histories[i].best_epoch, histories[i].stopped_early = stoppers[i].best_epoch, stoppers[i].done


def _members(
    make_model: Callable[[int], nn.Module], seeds: list[int], data: torch.Tensor, stream: bool
) -> list[nn.Module]:
    """One model per seed, all on one device: the data's (or any, for rows streamed from the host)."""
    models = [make_model(s) for s in seeds]
    device = next(models[0].parameters()).device
    if any(next(m.parameters()).device != device for m in models):
        raise DevicepipeError("fit_ensemble(): make_model must put every member on one device.")
    if data.device != device and not (stream and data.device.type == "cpu"):
        raise DevicepipeError(
            f"fit_ensemble(): make_model must put each model on the data's device ({data.device}), not {device}."
        )
    return models


def _member_loss(base: nn.Module, p: dict, b: dict, x: torch.Tensor, eps: torch.Tensor | None) -> torch.Tensor:
    return functional_call(base, (p, b), (x, eps)).mean()


def _member_sum(base: nn.Module, p: dict, b: dict, x: torch.Tensor) -> torch.Tensor:
    return functional_call(base, (p, b), (x, None)).sum()


def _train_epoch(
    base: nn.Module,
    params: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    optimizer: torch.optim.Optimizer,
    train: torch.Tensor,
    noises: list[Any],
    batch_size: int,
    device: torch.device,
) -> torch.Tensor:
    """One pass of every member over ``train`` in its own order and noise; each member's summed
    row losses, shape ``(members,)`` float64."""
    member_loss = partial(_member_loss, base)
    base.train()
    order = torch.stack([z.order for z in noises])  # (members, n_train)
    eps_all = None if noises[0].eps is None else torch.stack([z.eps for z in noises])  # (members, n_train, latent)
    totals = torch.zeros(len(noises), dtype=torch.float64, device=device)
    for start in range(0, train.shape[0], batch_size):
        idx = order[:, start : start + batch_size]
        xb = train[idx] if train.device == device else train[idx.to(train.device)].to(device)  # (members, batch, ...)
        if eps_all is None:
            losses = vmap(member_loss, in_dims=(0, 0, 0, None))(params, buffers, xb, None)
        else:
            losses = vmap(member_loss)(params, buffers, xb, eps_all[:, start : start + batch_size])
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()  # each member's gradient is that of its own mean loss
        optimizer.step()
        totals += losses.detach().to(torch.float64) * idx.shape[1]
    return totals


def _val_sums(
    base: nn.Module,
    params: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    val: torch.Tensor,
    members: int,
    device: torch.device,
) -> torch.Tensor:
    """Each member's summed validation loss in eval mode, shape ``(members,)`` (NaN without rows)."""
    base.eval()
    with torch.no_grad():
        val_sum = torch.zeros(members, dtype=val.dtype, device=device)
        for v in range(0, val.shape[0], VAL_BATCH):
            rows = val[v : v + VAL_BATCH].to(device)
            val_sum += vmap(partial(_member_sum, base), in_dims=(0, 0, None))(params, buffers, rows)
        if not val.shape[0]:
            val_sum = torch.full((members,), float("nan"), device=device)
    return val_sum


def save_ensemble(ensemble: Ensemble, path: str | Path, extra_state: dict[str, Any] | None = None) -> Path:
    """Write the members' weights, seeds, kind and config (and ``extra_state``) to ``path``, atomically."""
    first = as_model(ensemble.members[0])
    return write_torch(
        {
            "members": [m.state_dict() for m in ensemble.members],
            "seeds": ensemble.seeds,
            "model_kind": type(first).__name__,
            "config": first.config_dict(),
            **(extra_state or {}),
        },
        path,
    )
