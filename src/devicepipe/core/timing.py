"""Seconds per stage of a run, the device synchronised at each boundary; transfers counted per stage.

A :class:`StageTimer` times named stages (a stage entered twice adds up). Given a
:class:`~devicepipe.core.interop.TransferLedger`, it also counts the host-device copies made
inside each stage where they can happen (reading, detecting, cutting, scoring, copying
results back, writing), but not inside ``"train"``: the ledger sees every operator, and a
training loop is thousands of small ones (about 2x slower under it), while its data
already sits on the device.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from devicepipe.core.device import synchronize
from devicepipe.core.interop import TransferLedger, count_transfers

__all__ = ["UNCOUNTED_STAGES", "StageTimer"]

#: Stages in which transfers are not counted (their operators are many and small, their data on the device).
UNCOUNTED_STAGES = frozenset({"train"})


@dataclass
class StageTimer:
    """Wall-clock seconds per stage on ``device``; host-device copies into ``ledger`` when given."""

    device: torch.device
    ledger: TransferLedger | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def stage(self, name: str, *, count: bool = True) -> Iterator[None]:
        """Time the block as stage ``name`` (synchronising the device before and after);
        ``count=False``: the block counts its transfers itself (see :meth:`counted`)."""
        counting = count and self.ledger is not None and name not in UNCOUNTED_STAGES
        with count_transfers(self.ledger) if counting else contextlib.nullcontext():
            synchronize(self.device)
            started = time.perf_counter()
            yield
            synchronize(self.device)
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with the transfers it makes counted in the ledger: for a stage of many small
        operators whose data moves between devices only in ``fn`` (a chunk's read)."""
        if self.ledger is None:
            return fn

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with count_transfers(self.ledger):
                return fn(*args, **kwargs)

        return wrapped

    def transfers(self) -> dict[str, int | str] | None:
        """The ledger's counts and where they were counted (None without a ledger)."""
        if self.ledger is None:
            return None
        return {**self.ledger.to_dict(), "counted_in": "every stage but training"}
