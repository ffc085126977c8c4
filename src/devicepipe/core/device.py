"""Device resolution and the machine report behind ``devicepipe info``.

``"auto"`` is resolved here and only here (and by callers at the edge: the CLI and the
pipeline); every other function takes the device of its input tensor.
"""

from __future__ import annotations

import importlib
import math
import os
import platform
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from devicepipe import __version__
from devicepipe.core.errors import DeviceError

__all__ = [
    "all_finite",
    "resolve_device",
    "device_report",
    "cuda_unavailable_reason",
    "free_memory",
    "release_freed_memory",
    "synchronize",
    "full_float32",
]

_CUDA_SPEC = re.compile(r"^cuda(?::(\d+))?$")


def cuda_unavailable_reason() -> str | None:
    """Why CUDA cannot be used here, or ``None`` when it can.

    Distinguishes a PyTorch build without CUDA support from a CUDA build that finds no
    driver or device.
    """
    if torch.version.cuda is None:
        return f"this PyTorch build ({torch.__version__}) has no CUDA support"
    if not torch.cuda.is_available():
        return f"PyTorch {torch.__version__} is built for CUDA {torch.version.cuda} but finds no CUDA driver or GPU"
    return None


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """Turn a device specification into a concrete :class:`torch.device`.

    Parameters
    ----------
    spec : ``"auto"`` (CUDA device 0 when available, else the CPU), ``"cpu"``, ``"cuda"``
        (the current CUDA device), ``"cuda:N"``, a :class:`torch.device`, or ``None``
        (same as ``"auto"``).

    Raises
    ------
    DeviceError
        CUDA asked for but unavailable (with the reason), an index past the last GPU (with the
        list of those that exist), or a malformed string such as ``"cuda0"`` or ``"gpu"``.
    """
    if spec is None:
        spec = "auto"
    if isinstance(spec, torch.device):
        text = str(spec)
    elif isinstance(spec, str):
        text = spec.strip().lower()
    else:
        raise DeviceError(
            f"resolve_device(): expected a string or torch.device, got {type(spec).__name__}; "
            "use 'auto', 'cpu', 'cuda' or 'cuda:N'."
        )
    if text == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if _cuda_ok() else torch.device("cpu")
    if text == "cpu":
        return torch.device("cpu")
    match = _CUDA_SPEC.match(text)
    if match is None:
        near = re.match(r"^(?:cuda|gpu)\W*(\d*)$", text)
        hint = f"'cuda:{near.group(1) or 0}'" if near else "'auto', 'cpu', 'cuda' or 'cuda:0'"
        raise DeviceError(f"unknown device {spec!r}; use {hint} (devices are 'auto', 'cpu', 'cuda' or 'cuda:N').")
    reason = cuda_unavailable_reason()
    if reason is not None:
        raise DeviceError(
            f"device {spec!r} is not available: {reason}",
            fix="use {device='cpu'} or {device='auto'}.",
            param="device",
            value=spec,
        )
    count = torch.cuda.device_count()
    index = int(match.group(1)) if match.group(1) is not None else torch.cuda.current_device()
    if index >= count:
        existing = ", ".join(f"cuda:{i} ({torch.cuda.get_device_name(i)})" for i in range(count))
        raise DeviceError(f"device {spec!r} does not exist; this machine has {count} GPU(s): {existing}.")
    return torch.device("cuda", index)


def _cuda_ok() -> bool:
    return torch.version.cuda is not None and torch.cuda.is_available()


def synchronize(device: torch.device | str) -> None:
    """Wait for all queued work on ``device`` (a no-op on the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextmanager
def full_float32() -> Iterator[None]:
    """Run cuDNN convolutions in IEEE float32 within the block (also a decorator).

    PyTorch lets cuDNN compute float32 convolutions in TF32 (10-bit mantissa) by default. cuDNN
    picks TF32 kernels for some shapes only (a vmapped ensemble's grouped convolutions, for
    one), so the same model trained alone and inside an ensemble drifted apart by about 1e-3 on
    an H100, against 1e-7 with TF32 off. Training and scoring run in this block, so a GPU gives
    the CPU's answers to float32 rounding. The previous setting is restored on exit; the flag is
    process-wide, so other threads' convolutions during the block run in float32 too.
    """
    conv = getattr(torch.backends.cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):  # PyTorch 2.9 and later
        previous = conv.fp32_precision
        conv.fp32_precision = "ieee"
        try:
            yield
        finally:
            conv.fp32_precision = previous
    else:
        previous_flag = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False
        try:
            yield
        finally:
            torch.backends.cudnn.allow_tf32 = previous_flag


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def free_memory(device: torch.device) -> int:
    """Bytes free for new data on ``device``: the GPU's free memory, or the host's available
    memory (``MemAvailable``; where it cannot be read, 4 GiB)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4 * 2**30


#: CPU tensors under this many values are checked by :func:`all_finite` on the calling thread
#: (NumPy), not in torch's thread pool: on a loaded machine a parallel region waits for its
#: slowest thread, and a 100,000-sample check took 2 ms there instead of 0.03 ms.
ONE_THREAD_CHECK = 1 << 21


def all_finite(x: torch.Tensor) -> bool:
    """Whether every value of ``x`` is finite (no NaN or inf), in one pass where they all are:
    NaN or inf makes the sum non-finite, and only a sum that is not (NaN, inf, or an overflow of
    large finite values) is checked value by value. Integer tensors are always finite."""
    if not x.is_floating_point():
        return True
    if x.device.type == "cpu" and x.numel() < ONE_THREAD_CHECK and x.dtype in (torch.float32, torch.float64):
        a = x.detach().numpy()
        with np.errstate(over="ignore", invalid="ignore"):  # (an overflow or NaN is the answer, not a warning)
            return math.isfinite(float(a.sum(dtype=np.float64))) or bool(np.isfinite(a).all())
    return math.isfinite(float(x.sum())) or bool(torch.isfinite(x).all())


def release_freed_memory() -> bool:
    """Hand the host memory that was freed back to the operating system: PyArrow's pool (when
    PyArrow is in use) and, where the C library can, its heap (glibc's ``malloc_trim``, as Dask's
    workers do). Many mid-sized blocks freed after chunked work otherwise stay in the process's
    resident size. Returns whether the heap was trimmed."""
    if "pyarrow" in sys.modules:
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):  # not glibc
        return False


def _gpu_records() -> list[dict[str, Any]]:
    if not _cuda_ok():
        return []
    gpus = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        free, total = torch.cuda.mem_get_info(i)
        gpus.append(
            {
                "index": i,
                "name": props.name,
                "compute_capability": f"{props.major}.{props.minor}",
                "total_memory_bytes": int(total),
                "free_memory_bytes": int(free),
                "multiprocessors": int(props.multi_processor_count),
            }
        )
    return gpus


def _probe_cupy(mod: Any) -> str:
    a = mod.arange(4, dtype=mod.float32)
    return f"{mod.cuda.runtime.getDeviceCount()} device(s), sum={float(a.sum()):g}"


def _probe_cudf(mod: Any) -> str:
    return f"Series sum={float(mod.Series([1.0, 2.0]).sum()):g}"


def _probe_numba(mod: Any) -> str:
    from numba import cuda  # noqa: PLC0415 - only when numba imports

    if not cuda.is_available():
        return "CPU JIT only (numba.cuda: no GPU)"
    return f"numba.cuda: {len(cuda.gpus)} GPU(s)"


def _probe_jax(mod: Any) -> str:
    return "devices: " + ", ".join(str(d) for d in mod.devices())


def _probe_numeric(mod: Any) -> str:
    return "ok"


# name shown, module to import, probe run on the imported module
_OPTIONAL_LIBRARIES: tuple[tuple[str, str, Any], ...] = (
    ("CuPy", "cupy", _probe_cupy),
    ("cuDF", "cudf", _probe_cudf),
    ("Numba", "numba", _probe_numba),
    ("JAX", "jax", _probe_jax),
    ("Polars", "polars", _probe_numeric),
    ("pandas", "pandas", _probe_numeric),
    ("PyArrow", "pyarrow", _probe_numeric),
    ("wfdb", "wfdb", _probe_numeric),
)


def _library_records() -> list[dict[str, Any]]:
    records = []
    for shown, module, probe in _OPTIONAL_LIBRARIES:
        record: dict[str, Any] = {"name": shown, "module": module, "version": None}
        try:
            mod = importlib.import_module(module)
        except ImportError:
            record.update(status="not installed", works=False, detail="")
            records.append(record)
            continue
        except Exception as exc:  # a broken install (missing shared library, driver mismatch)
            record.update(status="broken", works=False, detail=f"{type(exc).__name__}: {exc}")
            records.append(record)
            continue
        record["version"] = getattr(mod, "__version__", None)
        try:
            record.update(status="ok", works=True, detail=probe(mod))
        except Exception as exc:
            record.update(status="imports, fails", works=False, detail=f"{type(exc).__name__}: {exc}")
        records.append(record)
    return records


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def device_report() -> dict[str, Any]:
    """Everything ``devicepipe info`` shows, as a JSON-serialisable dict.

    Keys: ``devicepipe`` (its version), ``python``, ``platform``, ``torch`` (version, CUDA and cuDNN build), ``cuda``
    (availability and the reason when unavailable), ``gpus`` (name, compute capability,
    memory in bytes, multiprocessors), ``cpu`` (model, logical cores, cores usable by this
    process, torch intra-op threads) and ``libraries`` (optional libraries: version and
    whether a small operation works).
    """
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "devicepipe": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": {"version": torch.__version__, "cuda_build": torch.version.cuda, "cudnn": cudnn},
        "cuda": {"available": _cuda_ok(), "reason": cuda_unavailable_reason()},
        "gpus": _gpu_records(),
        "cpu": {
            "model": _cpu_model(),
            "logical_cores": os.cpu_count(),
            "usable_cores": usable_cores(),
            "torch_threads": torch.get_num_threads(),
        },
        "libraries": _library_records(),
    }
