"""How many intra-op threads torch uses for a run's training and scoring, chosen by the size of the work.

On a CPU, PyTorch's threads help large convolutions and matrix products and hurt tiny
ones: each operator of a small model is over in microseconds, and waking a second thread
costs more than it saves (far more when other work shares the cores). The size that
decides is the work of one training step on one batch (forward and backward), counted in
floating-point operations of its convolutions and matrix products as
:class:`torch.utils.flop_counter.FlopCounterMode` counts them, but read at the Python call
(a :class:`torch.overrides.TorchFunctionMode`): FlopCounterMode's first use imports
``torch._dynamo``, which took 2-3 s of a 45-s demo.
Below :data:`ONE_THREAD_BELOW_FLOPS` one thread is used, above it every usable core; the
crossover was measured on a 2-core machine (``benchmarks/threads_crossover.py``).

R-peak detection on a CPU (:func:`detection_threads`) is decided by its input's size instead:
below :data:`DETECTION_THREADS_FROM` samples one thread, from there the threads torch has, less
the cores other work is running on at the moment of the call (:func:`runnable_elsewhere`): a
second thread on a core that is already busy waits for its turn, and the whole call waits for it.

An explicit choice wins: ``threads=`` (the CLI's ``--threads``), then the
``DEVICEPIPE_THREADS`` environment variable. On a GPU the host's threads are left as they are.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from devicepipe.core.device import usable_cores
from devicepipe.core.errors import DevicepipeError

__all__ = [
    "DETECTION_THREADS_FROM",
    "ONE_THREAD_BELOW_FLOPS",
    "THREADS_ENV",
    "ThreadChoice",
    "check_thread_count",
    "choose_threads",
    "detection_threads",
    "requested_threads",
    "runnable_elsewhere",
    "step_flops",
    "using_threads",
]

#: Environment variable that fixes the thread count (an integer >= 1).
THREADS_ENV = "DEVICEPIPE_THREADS"
#: Training-step work (FLOP, forward and backward) below which one thread is used on a CPU. Measured
#: on 2 idle cores (benchmarks/results/threads_crossover*.json): with OMP_WAIT_POLICY=PASSIVE, as the
#: command sets it, a second thread lost on every step under 100 MFLOP (0.23-0.94x) and won from
#: 365 MFLOP (1.31x); in two earlier runs without that policy it lost up to 6 MFLOP, won 1.2-1.6x
#: from 365 MFLOP, and between 12 and 91 MFLOP the runs disagreed (0.67-1.28x).
ONE_THREAD_BELOW_FLOPS = 100e6
#: Samples (all rows of a call together) from which R-peak detection on a CPU uses more than one
#: thread. Measured at 1 and 2 threads, interleaved, with OMP_WAIT_POLICY=PASSIVE
#: (benchmarks/results/detection_threads.json): on 2 idle cores one thread was faster up to
#: 1,000,000 samples (0.81x for two at 1 M, 0.64x at 100 k) and two from about 2,000,000 (1.38x at
#: 4 M, 1.60x at 20 M); with two busy processes one thread was as fast or faster up to 4 M. From here
#: the cores busy elsewhere are left out (:func:`detection_threads`).
DETECTION_THREADS_FROM = 2_000_000


@dataclass(frozen=True)
class ThreadChoice:
    """The intra-op thread count for a piece of work, and why."""

    threads: int
    reason: str  # "policy", "threads=", "DEVICEPIPE_THREADS" or "cuda (host threads unchanged)"
    step_flops: float | None = None  # the work of one training step, when the policy measured it

    def to_dict(self) -> dict[str, int | str | float | None]:
        return {
            "threads": self.threads,
            "reason": self.reason,
            "step_flops": self.step_flops,
            "wait_policy": wait_policy(),
        }


def wait_policy() -> str:
    """What idle OpenMP threads do, as this process's environment set it before the runtime
    started (``OMP_WAIT_POLICY``): ``"PASSIVE"`` (they sleep: the ``devicepipe`` command's
    choice), ``"ACTIVE"`` (they spin), or ``"default"`` (the runtime's own: spin a while, then sleep)."""
    return os.environ.get("OMP_WAIT_POLICY", "").upper() or "default"


def step_flops(model: nn.Module, batch: torch.Tensor) -> float:
    """Floating-point operations of one training step of ``model`` on ``batch`` (forward and backward).

    Counted by shape, as :class:`torch.utils.flop_counter.FlopCounterMode` counts them (tested
    equal): each convolution or matrix product ``2 * multiply-adds`` forward, as much again for
    its weight's gradient and again for its input's where they need one. Elementwise operations
    are not counted (they are cheap next to convolutions and products). The model's gradients
    are cleared afterwards.
    """
    was = model.training
    model.train()
    spec: Any = model  # (a devicepipe.models.Model, which this layer does not import)
    noise = None if spec.noise_dim is None else torch.zeros(batch.shape[0], spec.noise_dim, device=batch.device)
    with _FlopCount() as counter:
        loss = spec.losses(batch, noise).mean()
    loss.backward()
    model.zero_grad(set_to_none=True)
    model.train(was)
    return float(counter.flops)


_CONVOLUTIONS = (torch.conv1d, torch.conv2d, torch.conv3d)
_TRANSPOSED = (torch.conv_transpose1d, torch.conv_transpose2d, torch.conv_transpose3d)
_PRODUCTS = (torch.mm, torch.bmm, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__)


def _product_flops(func: Any, args: tuple[Any, ...], out: Any) -> int | None:
    """The forward flops of a convolution or matrix product call (``args`` in, ``out`` out) as
    FlopCounterMode counts them; None for any other call."""
    if func in _CONVOLUTIONS or func in _TRANSPOSED:  # batch * weights * output (input when transposed) positions
        x, w = args[0], args[1]
        positions = (x if func in _TRANSPOSED else out)[0, 0].numel()
        return 2 * x.shape[0] * w.numel() * positions
    if func is torch.nn.functional.linear:
        return 2 * (args[0].numel() // args[0].shape[-1]) * args[1].numel()
    if func in _PRODUCTS:
        return 2 * out.numel() * args[0].shape[-1]
    return None


class _FlopCount(TorchFunctionMode):
    """Adds up the flops of every convolution and matrix product called under it: forward, and
    in the backward as much again for each of its two operands that needs a gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        forward = _product_flops(func, args, out)
        if forward is not None:
            needs = sum(isinstance(t, torch.Tensor) and t.requires_grad for t in args[:2])
            self.flops += forward * (1 + needs)
        return out


#: Threads per core beyond which a count is refused: more than the cores run gives no speed, and
#: tens of thousands of threads exhaust the process (PyTorch's pool crashed at 100,000).
THREADS_PER_CORE = 4


def most_threads() -> int:
    """The largest thread count this process accepts: :data:`THREADS_PER_CORE` per usable core."""
    return THREADS_PER_CORE * usable_cores()


def check_thread_count(threads: int) -> int:
    """``threads`` when it is a usable count (1 to :func:`most_threads`), else a clear error."""
    if threads < 1:
        raise DevicepipeError(
            f"{{param}} must be at least 1, got {threads}", fix="use e.g. {threads=1}.", param="threads", value=threads
        )
    if threads > most_threads():
        cores = usable_cores()
        raise DevicepipeError(
            f"{{param}} {threads:,} is more than this machine can run: it has {cores} core{'s' if cores > 1 else ''}",
            fix=f"use at most {{threads={most_threads()}}} (or drop {{threads}}: chosen by the size of a step).",
            param="threads",
            value=threads,
        )
    return threads


def requested_threads(threads: int | None = None) -> tuple[int, str] | None:
    """The thread count asked for, and by what (``threads=`` first, then ``DEVICEPIPE_THREADS``),
    or None; a clear error for a value that is not a count."""
    if threads is not None:
        return check_thread_count(threads), "threads="
    env = os.environ.get(THREADS_ENV)
    if env is None or not env.strip():
        return None
    try:
        value = int(env)
    except ValueError:
        value = 0
    if not 1 <= value <= most_threads():
        raise DevicepipeError(
            f"{THREADS_ENV}={env!r} is not a thread count this machine runs; set a whole number from 1 to "
            f"{most_threads()} or unset it."
        )
    return value, THREADS_ENV


def choose_threads(
    model: nn.Module,
    batch: torch.Tensor,
    *,
    threads: int | None = None,
    cores: int | None = None,
    copies: int = 1,
) -> ThreadChoice:
    """The thread count for training ``model`` on batches like ``batch`` (and scoring with it).

    ``threads`` (else ``DEVICEPIPE_THREADS``) fixes it; otherwise one thread below
    :data:`ONE_THREAD_BELOW_FLOPS` per step and ``cores`` (default: the usable cores) above.
    ``copies`` models trained at once (a vmap ensemble) multiply the work of a step. On a
    CUDA device the host's current count is kept.
    """
    asked = requested_threads(threads)
    if asked is not None:
        return ThreadChoice(asked[0], asked[1])
    if batch.device.type != "cpu":
        return ThreadChoice(torch.get_num_threads(), f"{batch.device.type} (host threads unchanged)")
    flops = step_flops(model, batch) * copies
    n = 1 if flops < ONE_THREAD_BELOW_FLOPS else max(1, cores or usable_cores())
    return ThreadChoice(n, "policy", flops)


def runnable_elsewhere(reads: int = 3, loadavg: str = "/proc/loadavg") -> int | None:
    """Threads on this machine that are running or ready to run, other than the caller, now.

    The kernel's instantaneous count (the fourth field of ``/proc/loadavg``, which includes the
    thread reading it), the least of ``reads`` reads so that a process starting or ending
    between them does not count; None where the file cannot be read (not Linux).
    """
    counts = []
    try:
        for _ in range(reads):
            with open(loadavg, "rb") as f:
                counts.append(int(f.read().split()[3].split(b"/")[0]))
    except (OSError, ValueError, IndexError):
        return None
    return max(0, min(counts) - 1)


def detection_threads(n_samples: int, device: torch.device | str = "cpu") -> int:
    """The intra-op threads for detecting R peaks in ``n_samples`` samples (all rows of a call) on
    ``device``: ``DEVICEPIPE_THREADS`` where it is set; on a CPU one thread below
    :data:`DETECTION_THREADS_FROM` samples, else torch's current count (never more) less the
    cores that other runnable threads occupy now (:func:`runnable_elsewhere`), at least one; on
    a GPU torch's current count (the host's threads are left as they are)."""
    asked = requested_threads()
    if asked is not None:
        return asked[0]
    current = torch.get_num_threads()
    if torch.device(device).type != "cpu":
        return current
    if n_samples < DETECTION_THREADS_FROM or current == 1:
        return 1
    others = runnable_elsewhere()
    if others is None:
        return current
    return max(1, min(current, (os.cpu_count() or 1) - others))


@contextlib.contextmanager
def using_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` intra-op threads, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
