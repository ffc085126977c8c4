"""Data in and out of torch without copies where the memory allows; a ledger of device transfers.

* :func:`to_torch` / :func:`convert` take NumPy, PyArrow (arrays, chunked arrays, table
  columns), pandas (Series, DataFrame columns), Polars, JAX, CuPy, cuDF and Numba device
  arrays, through ``__dlpack__``, ``__cuda_array_interface__``, ``__array_interface__`` and
  Arrow buffers. Where a copy is needed (nulls, nullable pandas dtypes, Arrow data split in
  chunks, dtypes torch lacks, another device, negative strides) :func:`convert` says why, and
  ``allow_copy=False`` raises :class:`CopyRefusedError` with that reason instead.
* :func:`from_torch` hands a tensor to any of those libraries, again sharing memory where
  the target allows (CPU targets for CPU tensors, GPU targets for CUDA tensors).
* Libraries are detected from the module of an object's type, without importing any library
  the caller has not imported (the ``sys.modules`` approach of array-api-compat).
* :func:`count_transfers` counts host-to-device and device-to-host copies inside a block.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from devicepipe.core.device import resolve_device
from devicepipe.core.errors import DevicepipeError

__all__ = [
    "KINDS",
    "Conversion",
    "CopyRefusedError",
    "ReadOnlyMemoryWarning",
    "TransferLedger",
    "convert",
    "count_transfers",
    "from_torch",
    "library_of",
    "shares_memory",
    "to_torch",
]

#: Targets of :func:`from_torch`.
KINDS = ("torch", "numpy", "pyarrow", "pandas", "polars", "jax", "cupy", "cudf", "numba")

_NUMPY_TO_TORCH = {
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.int8): torch.int8,
    np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.bool_): torch.bool,
    np.dtype(np.complex64): torch.complex64,
    np.dtype(np.complex128): torch.complex128,
}


class CopyRefusedError(DevicepipeError):
    """A conversion would need a copy and the caller passed ``allow_copy=False``."""


class ReadOnlyMemoryWarning(UserWarning):
    """:func:`to_torch` shares memory its owner keeps read-only (pandas under copy-on-write, Arrow,
    Polars, a read-only NumPy array or memory map): the tensor must not be written in place."""


@dataclass(frozen=True)
class Conversion:
    """The result of :func:`convert`: the tensor, and whether (and why) it is a copy."""

    tensor: torch.Tensor
    copied: bool
    reason: str | None = None
    #: Whether the tensor shares memory its owner keeps read-only (see :class:`ReadOnlyMemoryWarning`).
    read_only: bool = False


class _Copy:
    """Collects the reason for the first copy; raises at once when copies are refused."""

    def __init__(self, allow: bool, where: str) -> None:
        self.allow, self.where = allow, where
        self.reason: str | None = None
        self.read_only = False  # the shared NumPy view is not writeable

    def need(self, reason: str) -> None:
        if not self.allow:
            raise CopyRefusedError(
                f"{self.where}: a copy is needed because {reason}; pass allow_copy=True to accept it."
            )
        self.reason = self.reason or reason


def library_of(obj: Any) -> str:
    """The library an object belongs to: one of :data:`KINDS` or ``"unknown"``.

    Looks only at the type's module name, so it never imports anything.
    """
    if isinstance(obj, torch.Tensor):
        return "torch"
    if isinstance(obj, np.ndarray):
        return "numpy"
    root = type(obj).__module__.split(".", 1)[0]
    if root == "jaxlib":
        return "jax"
    return root if root in KINDS else "unknown"


def _from_numpy(arr: np.ndarray, copy: _Copy) -> torch.Tensor:
    if arr.dtype not in _NUMPY_TO_TORCH:
        if arr.dtype.kind not in "biufc":
            raise DevicepipeError(f"{copy.where}: NumPy dtype {arr.dtype} is not numeric.")
        copy.need(f"NumPy dtype {arr.dtype} has no torch equivalent")
        arr = arr.astype(np.float64 if arr.dtype.kind in "fiu" else arr.dtype)
    if any(s < 0 for s in arr.strides):  # torch cannot express negative strides
        copy.need("the NumPy array has negative strides")
        arr = np.ascontiguousarray(arr)
    copy.read_only = not arr.flags.writeable
    if not copy.read_only:  # (only a read-only array makes torch warn; a warnings context per call is not free)
        return torch.from_numpy(arr)
    with warnings.catch_warnings():
        # read-only arrays (memory maps, Arrow-backed buffers) are shared: to_torch says so in its own words
        warnings.filterwarnings("ignore", message=".*not writable.*", category=UserWarning)
        return torch.from_numpy(arr)


def _from_arrow(obj: Any, copy: _Copy) -> torch.Tensor:
    import pyarrow as pa  # noqa: PLC0415 - the caller already holds a pyarrow object

    if isinstance(obj, pa.ChunkedArray):
        if obj.num_chunks != 1:
            copy.need(f"the Arrow data is split into {obj.num_chunks} chunks")
            obj = obj.combine_chunks()
        else:
            obj = obj.chunk(0)
    if not (pa.types.is_floating(obj.type) or pa.types.is_integer(obj.type) or pa.types.is_boolean(obj.type)):
        raise DevicepipeError(f"{copy.where}: Arrow type {obj.type} is not numeric.")
    if obj.null_count:
        copy.need(f"the Arrow array has {obj.null_count} null(s), which become NaN")
        obj = (obj if pa.types.is_floating(obj.type) else obj.cast(pa.float64())).fill_null(float("nan"))
    if pa.types.is_boolean(obj.type):
        copy.need("Arrow booleans are bit-packed")
    # a primitive array without nulls is viewed in place (offset and length respected)
    return _from_numpy(obj.to_numpy(zero_copy_only=False), copy)


def _from_pandas(obj: Any, copy: _Copy) -> torch.Tensor:
    dtype = obj.dtype
    if not isinstance(dtype, np.dtype):
        # nullable extension dtypes (Float32, Int64, ...) keep a separate mask
        copy.need(f"pandas' nullable dtype {dtype} keeps a separate null mask")
        return _from_numpy(obj.to_numpy(dtype=np.float64, na_value=np.nan), copy)
    return _from_numpy(obj.to_numpy(copy=False), copy)


def _from_polars(obj: Any, copy: _Copy) -> torch.Tensor:
    if obj.null_count():
        copy.need(f"the Polars series has {obj.null_count()} null(s)")
        return _from_numpy(obj.cast(float).to_numpy(), copy)
    try:
        arr = obj.to_numpy(allow_copy=False)
    except Exception:
        copy.need(f"Polars cannot expose {obj.dtype} data without copying (e.g. several chunks)")
        arr = obj.to_numpy()
    return _from_numpy(arr, copy)


def _from_cuda_interface(obj: Any) -> torch.Tensor:
    # numba device arrays and other __cuda_array_interface__ producers: torch.as_tensor views them
    return torch.as_tensor(obj, device="cuda")


def _from_cudf(obj: Any, copy: _Copy) -> torch.Tensor:
    if obj.null_count:
        copy.need(f"the cuDF series has {obj.null_count} null(s)")
        obj = obj.astype("float64").fillna(float("nan"))
    # Series.to_cupy() views the column's device buffer; DataFrame.to_dlpack would copy
    return torch.from_dlpack(obj.to_cupy())


def convert(
    obj: Any, *, device: torch.device | str | None = None, allow_copy: bool = True, where: str = "to_torch()"
) -> Conversion:
    """Convert an array-like object to a tensor and say whether that took a copy.

    Parameters
    ----------
    obj : torch tensor, NumPy array, PyArrow Array/ChunkedArray, pandas Series, Polars Series,
        JAX or CuPy array, cuDF Series, Numba device array, or anything with ``__dlpack__``,
        ``__cuda_array_interface__`` or ``__array_interface__``.
    device : where the result must live; None keeps the object's own device. Moving to
        another device is a copy.
    allow_copy : when False, raise :class:`CopyRefusedError` instead of copying.
    where : the function the errors name (the caller's, where it converts for its user).
    """
    copy = _Copy(allow_copy, where)
    lib = library_of(obj)
    kind = type(obj).__name__
    if lib == "torch":
        tensor = obj
    elif lib == "numpy":
        tensor = _from_numpy(obj, copy)
    elif lib == "pyarrow" and kind not in ("Table", "RecordBatch"):
        tensor = _from_arrow(obj, copy)
    elif lib == "pandas" and kind == "Series":
        tensor = _from_pandas(obj, copy)
    elif lib == "polars" and kind == "Series":
        tensor = _from_polars(obj, copy)
    elif lib == "cudf" and kind == "Series":
        tensor = _from_cudf(obj, copy)
    elif lib in ("pandas", "polars", "cudf", "pyarrow"):
        raise DevicepipeError(f"{where}: pick one column of the {lib} {kind} (a Series), e.g. df['ecg'].")
    elif hasattr(obj, "__dlpack__"):
        tensor = torch.from_dlpack(obj)  # JAX, CuPy, NumPy-likes: shared memory, either device
    elif hasattr(obj, "__cuda_array_interface__"):
        tensor = _from_cuda_interface(obj)
    elif hasattr(obj, "__array_interface__"):
        tensor = _from_numpy(np.asarray(obj), copy)
    elif hasattr(obj, "__array__") or isinstance(obj, (list, tuple)):
        copy.need(f"{type(obj).__name__} exposes no shareable buffer")
        tensor = _from_numpy(np.asarray(obj), copy)
    else:
        raise DevicepipeError(
            f"{where}: cannot convert {type(obj).__module__}.{kind}; pass a NumPy, PyArrow, pandas, "
            "Polars, JAX, CuPy, cuDF or torch array, or an object with __dlpack__."
        )
    if device is not None and (str(device) == "auto" or str(device).startswith("cuda")):
        device = resolve_device(device)  # "auto", and a clear error for a GPU that is not there
    elif device is not None:
        device = torch.device(device)
    if device is not None and tensor.device != device:
        copy.need(f"the data is on {tensor.device}, not {device}")
        tensor = tensor.to(device)
        copy.read_only = False
    # a copy made on the way is the caller's alone, whatever its flags: only memory still shared is read-only
    return Conversion(tensor, copy.reason is not None, copy.reason, copy.read_only and copy.reason is None)


def to_torch(obj: Any, *, device: torch.device | str | None = None, allow_copy: bool = True) -> torch.Tensor:
    """:func:`convert`, returning only the tensor (same shape; dtype follows the source).

    A tensor that shares memory its owner keeps read-only (pandas 3's copy-on-write columns,
    Arrow and Polars buffers, read-only NumPy arrays) comes with a :class:`ReadOnlyMemoryWarning`,
    as ``torch.from_numpy`` warns of read-only arrays: writing it in place would change data its
    owner promises does not change (a ``df.copy(deep=False)``, another table sharing the buffer).
    ``.clone()`` it to write; :func:`convert` says ``read_only`` without a warning.
    """
    c = convert(obj, device=device, allow_copy=allow_copy)
    if c.read_only:
        warnings.warn(
            f"to_torch(): the tensor shares the read-only memory of a {library_of(obj)} {type(obj).__name__}; "
            "do not write to it in place (its owner promises that memory does not change): .clone() it first.",
            ReadOnlyMemoryWarning,
            stacklevel=2,
        )
    return c.tensor


def _require(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise DevicepipeError(f"from_torch(): {module} is not installed; pip install it to convert to it.") from None


def from_torch(tensor: torch.Tensor, kind: str, *, allow_copy: bool = True) -> Any:
    """Hand ``tensor`` to another library, sharing its memory where that library allows.

    ``kind`` is one of :data:`KINDS`. CPU targets (``numpy``, ``pyarrow``, ``pandas``,
    ``polars``) share a contiguous CPU tensor; GPU targets (``cupy``, ``cudf``, ``numba``)
    share a CUDA tensor; ``jax`` follows the tensor's device. A tensor on the other side, a
    non-contiguous one where the target needs contiguity, or a 2-D tensor for a 1-D target is
    copied (or refused with ``allow_copy=False``).
    """
    if kind not in KINDS:
        raise DevicepipeError(f"from_torch(): unknown kind {kind!r}; choose one of {list(KINDS)}.")
    copy = _Copy(allow_copy, "from_torch()")
    t = tensor.detach()
    if kind == "torch":
        return t
    gpu_kind = kind in ("cupy", "cudf", "numba")
    if gpu_kind and t.device.type != "cuda":
        copy.need(f"{kind} holds GPU memory and the tensor is on {t.device}")
        t = t.to("cuda")
    if kind in ("numpy", "pyarrow", "pandas", "polars") and t.device.type != "cpu":
        copy.need(f"{kind} holds host memory and the tensor is on {t.device}")
        t = t.cpu()
    if kind in ("pyarrow", "pandas", "polars", "cudf"):
        if t.ndim != 1:
            raise DevicepipeError(f"from_torch(): {kind} takes 1-D data, got shape {tuple(t.shape)}.")
        if not t.is_contiguous():
            copy.need(f"{kind} needs contiguous memory and the tensor is strided")
            t = t.contiguous()
    if kind == "numpy":
        return t.numpy()
    if kind == "pyarrow":
        pa = _require("pyarrow")
        arr = t.numpy()
        return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), len(arr), [None, pa.py_buffer(arr)])
    if kind == "pandas":
        pd = _require("pandas")
        return pd.Series(t.numpy(), copy=False)
    if kind == "polars":
        pl = _require("polars")
        return pl.from_arrow(from_torch(t, "pyarrow"))
    if kind == "jax":
        jax = _require("jax")
        return jax.dlpack.from_dlpack(t)
    if kind == "cupy":
        return _require("cupy").from_dlpack(t)
    if kind == "cudf":
        return _require("cudf").Series(_require("cupy").from_dlpack(t))
    numba_cuda = _require("numba.cuda")
    return numba_cuda.as_cuda_array(t)


def _extent(t: torch.Tensor) -> tuple[int, int]:
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    low = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True) if s < 0)
    high = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True) if s > 0)
    return (t.data_ptr() + low * t.element_size(), t.data_ptr() + (high + 1) * t.element_size())


def shares_memory(a: Any, b: Any) -> bool:
    """Whether two array-likes (of any supported libraries) overlap in memory.

    Compares the byte ranges their data pointers and strides span on the same device; an
    object that cannot be viewed without a copy shares memory with nothing. Only looks: no
    read-only warning for memory its owner keeps read-only (nothing is handed out to write).
    """
    try:
        ta = convert(a, allow_copy=False).tensor
        tb = convert(b, allow_copy=False).tensor
    except CopyRefusedError:
        return False
    if ta.device != tb.device:
        return False
    (a0, a1), (b0, b1) = _extent(ta), _extent(tb)
    return a0 < b1 and b0 < a1


# ----------------------------------------------------------------------------- transfer ledger


@dataclass
class TransferLedger:
    """Copies between devices seen inside a :func:`count_transfers` block.

    ``host_to_device`` and ``device_to_host`` count copies (and ``*_bytes`` their sizes);
    ``other`` holds copies between two non-host devices or to ``meta``; ``events`` lists each
    one as ``(source device, target device, bytes, operator)``.
    """

    host_to_device: int = 0
    device_to_host: int = 0
    host_to_device_bytes: int = 0
    device_to_host_bytes: int = 0
    other: int = 0
    events: list[tuple[str, str, int, str]] = field(default_factory=list)

    def record(self, source: torch.device, target: torch.device, nbytes: int, op: str) -> None:
        if source == target:
            return
        self.events.append((str(source), str(target), int(nbytes), op))
        if source.type == "cpu" and target.type not in ("cpu", "meta"):
            self.host_to_device += 1
            self.host_to_device_bytes += nbytes
        elif target.type == "cpu" and source.type not in ("cpu", "meta"):
            self.device_to_host += 1
            self.device_to_host_bytes += nbytes
        else:
            self.other += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "host_to_device": self.host_to_device,
            "host_to_device_bytes": self.host_to_device_bytes,
            "device_to_host": self.device_to_host,
            "device_to_host_bytes": self.device_to_host_bytes,
            "other": self.other,
        }


class _LedgerMode(TorchDispatchMode):
    """Sees every ATen operator call; records the ones that move data between devices."""

    def __init__(self, ledger: TransferLedger) -> None:
        super().__init__()
        self.ledger = ledger

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ to keep torch.compile out of it, and the
        # wrapper imports torch._dynamo at its first call: 1.3 s of every command's start on
        # the CPU. Nothing is compiled inside a counted block, so the wrapper is not needed.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.__name__ if hasattr(func, "__name__") else str(func)
        packet = getattr(func, "overloadpacket", None)
        base = getattr(packet, "__name__", name)
        if base in ("_to_copy", "copy_", "_copy_from", "_copy_from_and_resize") and args:
            src = args[0] if base == "_to_copy" else args[1] if base == "copy_" else args[0]
            dst = out if base == "_to_copy" else args[0] if base == "copy_" else args[1]
            if isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor):
                self.ledger.record(src.device, dst.device, dst.numel() * dst.element_size(), base)
        elif base == "_local_scalar_dense" and args and isinstance(args[0], torch.Tensor):
            self.ledger.record(args[0].device, torch.device("cpu"), args[0].element_size(), base)
        return out


@contextmanager
def count_transfers(ledger: TransferLedger | None = None) -> Iterator[TransferLedger]:
    """Count host-to-device and device-to-host copies made by torch inside the block.

    Counts into ``ledger`` when given (so several blocks add up in one ledger), else into a
    new one. Every operator inside the block passes through the ledger's check, which costs
    time on many small operators (a training loop): count where transfers can happen.

    What it sees: every copy torch's dispatcher performs between devices, ``.to()``,
    ``.cuda()``, ``.cpu()``, ``copy_`` across devices, and ``.item()``/``.tolist()``-style
    reads of single values (``_local_scalar_dense``), with their sizes.

    What it cannot see: copies made by other libraries (CuPy, cuDF, Numba, JAX, NumPy),
    tensors created on a device straight from host data by factory functions
    (``torch.tensor(list, device="cuda")``, ``torch.as_tensor(array, device="cuda")`` may not
    dispatch a copy), and small synchronising reads inside single operators (``nonzero``
    reading its count on CUDA).

    >>> with count_transfers() as ledger:
    ...     y = x.to("cuda") * 2
    >>> ledger.host_to_device
    1
    """
    ledger = TransferLedger() if ledger is None else ledger
    with _LedgerMode(ledger):
        yield ledger
