"""Conversions between torch tensors and the array libraries people hold data in.

Libraries are detected by the module of an object's type, without importing any library the
caller has not imported (the ``sys.modules`` approach of array-api-compat). Conversions share
memory wherever the source's layout allows; ``allow_copy=False`` turns every would-be copy
into a :class:`CopyRefusedError` that names the reason.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from devicepipe.errors import DevicepipeError

__all__ = ["CopyRefusedError", "library_of", "to_torch", "shares_memory"]

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
}


class CopyRefusedError(DevicepipeError):
    """A conversion would need a copy and the caller passed ``allow_copy=False``."""


def library_of(obj: Any) -> str:
    """The library an object belongs to: ``"torch"``, ``"numpy"``, ``"pyarrow"``, ``"pandas"``,
    ``"polars"``, ``"cupy"``, ``"cudf"``, ``"numba"``, ``"jax"``, or ``"unknown"``.

    Looks only at the type's module name, so it never imports anything.
    """
    if isinstance(obj, torch.Tensor):
        return "torch"
    if isinstance(obj, np.ndarray):
        return "numpy"
    root = type(obj).__module__.split(".", 1)[0]
    if root in {"pyarrow", "pandas", "polars", "cupy", "cudf", "numba", "jax", "jaxlib"}:
        return "jax" if root == "jaxlib" else root
    return "unknown"


def _refuse(allow_copy: bool, reason: str) -> None:
    if not allow_copy:
        raise CopyRefusedError(f"to_torch(): a copy is needed because {reason}; pass allow_copy=True to accept it.")


def _from_numpy(arr: np.ndarray, allow_copy: bool) -> torch.Tensor:
    if arr.dtype not in _NUMPY_TO_TORCH:
        _refuse(allow_copy, f"NumPy dtype {arr.dtype} has no torch equivalent")
        return torch.from_numpy(np.asarray(arr, dtype=np.float64))
    if any(s < 0 for s in arr.strides):  # torch cannot express negative strides
        _refuse(allow_copy, "the NumPy array has negative strides")
        arr = np.ascontiguousarray(arr)
    with warnings.catch_warnings():
        # read-only arrays (memory maps, Arrow-backed buffers) are shared, not written to
        warnings.filterwarnings("ignore", message=".*not writable.*", category=UserWarning)
        return torch.from_numpy(arr)


def _from_arrow(obj: Any, allow_copy: bool) -> torch.Tensor:
    import pyarrow as pa  # noqa: PLC0415 - the caller already holds a pyarrow object

    if isinstance(obj, pa.ChunkedArray):
        if obj.num_chunks != 1:
            _refuse(allow_copy, f"the Arrow data is split into {obj.num_chunks} chunks")
            obj = obj.combine_chunks()
        else:
            obj = obj.chunk(0)
    if obj.null_count:
        _refuse(allow_copy, f"the Arrow array has {obj.null_count} null(s), which become NaN")
        obj = obj.cast(pa.float64()) if not pa.types.is_floating(obj.type) else obj
        obj = obj.fill_null(float("nan"))
    if not (pa.types.is_floating(obj.type) or pa.types.is_integer(obj.type) or pa.types.is_boolean(obj.type)):
        raise DevicepipeError(f"to_torch(): Arrow type {obj.type} is not numeric.")
    # a primitive array without nulls is viewed in place; bools are bit-packed and copied
    if pa.types.is_boolean(obj.type):
        _refuse(allow_copy, "Arrow booleans are bit-packed")
    return _from_numpy(obj.to_numpy(zero_copy_only=False), allow_copy)


def _from_pandas(obj: Any, allow_copy: bool) -> torch.Tensor:
    dtype = obj.dtype
    if getattr(dtype, "na_value", None) is not None and not isinstance(dtype, np.dtype):
        # nullable extension dtypes (Float32, Int64, ...) keep a separate mask
        _refuse(allow_copy, f"pandas' nullable dtype {dtype} keeps a separate null mask")
        return _from_numpy(obj.to_numpy(dtype=np.float64, na_value=np.nan), True)
    return _from_numpy(obj.to_numpy(copy=False), allow_copy)


def _from_polars(obj: Any, allow_copy: bool) -> torch.Tensor:
    if obj.null_count():
        _refuse(allow_copy, f"the Polars series has {obj.null_count()} null(s)")
    try:
        arr = obj.to_numpy(allow_copy=False)
    except Exception:
        _refuse(allow_copy, f"Polars cannot expose {obj.dtype} data without copying")
        arr = obj.to_numpy()
    return _from_numpy(arr, allow_copy)


def to_torch(obj: Any, *, device: torch.device | str | None = None, allow_copy: bool = True) -> torch.Tensor:
    """Convert an array-like object to a tensor, sharing memory where the layout allows.

    Parameters
    ----------
    obj : torch tensor, NumPy array, PyArrow Array/ChunkedArray, pandas Series, Polars
        Series, or anything with ``__dlpack__`` (CuPy, JAX, ...).
    device : where the result must live; ``None`` keeps the object's own device. Moving to
        another device is a copy.
    allow_copy : when False, raise :class:`CopyRefusedError` instead of copying.

    Returns
    -------
    Tensor with the object's shape; dtype follows the source where torch has it.
    """
    lib = library_of(obj)
    if lib == "torch":
        tensor = obj
    elif lib == "numpy":
        tensor = _from_numpy(obj, allow_copy)
    elif lib == "pyarrow":
        tensor = _from_arrow(obj, allow_copy)
    elif lib == "pandas":
        tensor = _from_pandas(obj, allow_copy)
    elif lib == "polars":
        tensor = _from_polars(obj, allow_copy)
    elif hasattr(obj, "__dlpack__"):
        tensor = torch.from_dlpack(obj)
    elif hasattr(obj, "__array__") or isinstance(obj, (list, tuple)):
        _refuse(allow_copy, f"{type(obj).__name__} exposes no shareable buffer")
        tensor = _from_numpy(np.asarray(obj), True)
    else:
        raise DevicepipeError(
            f"to_torch(): cannot convert {type(obj).__module__}.{type(obj).__name__}; "
            "pass a NumPy/PyArrow/pandas/Polars/torch array or an object with __dlpack__."
        )
    if device is not None and tensor.device != torch.device(device):
        _refuse(allow_copy, f"the data is on {tensor.device}, not {device}")
        tensor = tensor.to(device)
    return tensor


def _extent(t: torch.Tensor) -> tuple[int, int]:
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return (t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size())


def shares_memory(a: Any, b: Any) -> bool:
    """Whether two array-likes (of any supported libraries) overlap in memory.

    Compares the byte ranges their data pointers and strides span (refusing copies, so an
    object that cannot be viewed without a copy does not share memory).
    """
    try:
        ta = to_torch(a, allow_copy=False)
        tb = to_torch(b, allow_copy=False)
    except CopyRefusedError:
        return False
    if ta.device != tb.device:
        return False
    (a0, a1), (b0, b1) = _extent(ta), _extent(tb)
    return a0 < b1 and b0 < a1
