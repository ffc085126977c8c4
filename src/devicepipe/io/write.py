"""Writing outputs so that an interrupted run never leaves a half-written file that looks whole.

Every writer goes through :func:`atomic_path` (a temporary file beside the target, renamed
onto it when complete); :func:`staged_dir` does the same for a whole run directory;
:func:`check_output_dir` rejects an output location that cannot be a directory before any
work starts (:class:`OutputError`).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import io
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import torch

from devicepipe.core.errors import DevicepipeError, OutputError, is_disk_full
from devicepipe.core.units import hertz
from devicepipe.io.tables import SAMPLING_RATE_KEY

__all__ = [
    "atomic_path",
    "check_output_dir",
    "staged_dir",
    "sweep_leftovers",
    "write_csv",
    "write_json",
    "write_npy",
    "write_parquet",
    "write_torch",
]

#: Rows per Parquet row group written: the encoder holds one group at a time, so writing a
#: week's 700,000 beats does not hold a second copy of the table (and readers can take a group).
ROW_GROUP = 65_536


def check_output_dir(out: str | os.PathLike[str], *, probe: bool = True) -> Path:
    """``out`` as a Path, or a clear :class:`OutputError` when it names something that is not a
    directory or (``probe``: by creating and removing a directory there) cannot be written."""
    final = Path(out)
    if final.exists() and not final.is_dir():
        raise OutputError(f"output {final} exists and is not a directory", fix="choose another {out}.", param="out")
    nearest = final if final.exists() else next((p for p in final.parents if p.exists()), Path("."))
    if not nearest.is_dir():
        raise OutputError(f"cannot create {final}: {nearest} is a file", fix="choose another {out}.", param="out")
    if not probe:
        return final
    try:  # can anything be created there? (a probe that leaves nothing behind)
        os.rmdir(tempfile.mkdtemp(prefix=".devicepipe-probe-", dir=nearest))
    except OSError as exc:
        raise OutputError(
            f"cannot write in {nearest} ({exc.strerror or exc})", fix="choose another {out}.", param="out"
        ) from None
    return final


def _umask() -> int:
    """The process's file-creation mask (read without changing it where the platform allows)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # elsewhere: read it by setting it, and put it back at once
    os.umask(mask)
    return mask


def _as_if_created(path: str | os.PathLike[str], directory: bool) -> None:
    """Give a temporary file (0600) or directory (0700) the mode an ordinary one would have under the umask."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    An interrupted or failing writer leaves no file at ``path`` (and no temporary file). The
    file ends with the permissions the user's umask gives any new file (not the temporary
    file's owner-only ones), so colleagues can open a shared run.
    """
    final = Path(path)
    if final.is_dir():
        raise OutputError(f"cannot write {final}: it is a directory", fix="give {out} a file name.", param="out")
    try:
        if not final.parent.is_dir():  # (an existing directory: mkstemp itself says when it cannot write there)
            check_output_dir(final.parent).mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    except OSError as exc:
        problem = f"cannot write {final} ({exc.strerror or exc})"
        raise OutputError(problem, fix="choose another {out}.", param="out") from None
    os.close(fd)
    try:
        yield Path(tmp)
        _as_if_created(tmp, directory=False)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def sweep_leftovers(out: str | os.PathLike[str]) -> list[Path]:
    """Remove what an earlier run into ``out`` left when it was killed: temporary files of
    :func:`atomic_path` inside ``out`` (``.NAME.*.tmp``) and staged directories of
    :func:`staged_dir` beside it (``.OUT.*.partial``). Returns what was removed."""
    final = Path(out)
    removed = []
    candidates = [*final.glob(".*.tmp")] if final.is_dir() else []
    if final.parent.is_dir():
        candidates += [p for p in final.parent.glob(f".{glob.escape(final.name)}.*.partial") if p.is_dir()]
    for path in candidates:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        removed.append(path)
    return removed


@contextlib.contextmanager
def staged_dir(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``out``; move its files into ``out`` on success.

    A run that fails part-way leaves ``out`` as it was (nothing half-written in it). Files of
    an earlier run in ``out`` that the new run also writes are replaced, each atomically.
    """
    final = check_output_dir(out, probe=False)  # (mkdtemp below says when nothing can be written there)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    except OSError as exc:
        raise OutputError(
            f"cannot write in {final.parent} ({exc.strerror or exc})", fix="choose another {out}.", param="out"
        ) from None
    try:
        yield stage
        _as_if_created(stage, directory=True)
        if not final.exists():
            os.replace(stage, final)
            return
        for item in stage.iterdir():
            target = final / item.name
            if target.is_dir() and not item.is_dir():
                raise OutputError(f"cannot replace directory {target} with a file.")
            os.replace(item, target)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


def _host(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return value


def arrow_column(value: Any) -> Any:
    """``value`` as an Arrow array when it is a 1-D NumPy array of numbers, booleans or text, made
    without ``pyarrow.array``'s look at pandas types (whose first call imports pandas: 0.35-0.5 s
    of a command that uses no pandas); numbers share the array's memory. Anything else is
    returned as it is, for :func:`pyarrow.table` to convert."""
    if not isinstance(value, np.ndarray) or value.ndim != 1:
        return value
    kind = value.dtype.kind
    if kind in "iuf" and value.dtype.byteorder in "=|":
        flat = np.ascontiguousarray(value)
        return pa.Array.from_buffers(pa.from_numpy_dtype(flat.dtype), len(flat), [None, pa.py_buffer(flat)])
    if kind == "b":
        bits = np.packbits(value, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(value), [None, pa.py_buffer(bits)])
    if kind == "U" or (kind == "O" and all(isinstance(v, str) for v in value)):
        encoded = [text.encode() for text in value.tolist()]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
        if offsets[-1] < 2**31:  # (a string column's offsets are 32-bit)
            buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
            return pa.Array.from_buffers(pa.string(), len(encoded), buffers)
    return value


def _to_table(data: pa.Table | Mapping[str, Any], where: str, matrices: bool = True) -> pa.Table:
    """A mapping of columns as one Arrow table (a 2-D column, where ``matrices``, as a fixed-size
    list a row); a clear error from ``where`` for columns that make no table (none; of two
    lengths; of more than two dimensions, or two where the format holds one value a cell)."""
    if isinstance(data, pa.Table):
        return data
    if not data:
        raise DevicepipeError(f"{where}: no columns to write; pass a mapping of column names to arrays.")
    columns = {}
    for name, value in data.items():
        value = _host(value)
        ndim = getattr(value, "ndim", 1)
        if ndim > (2 if matrices else 1):
            most = (
                "(rows,) or (rows, width)" if matrices else "(rows,): a CSV cell holds one value (Parquet holds rows)"
            )
            raise DevicepipeError(f"{where}: column {name!r} has shape {tuple(value.shape)}; columns are {most}.")
        if isinstance(value, np.ndarray) and value.ndim == 2:
            # a matrix column becomes a fixed-size list column (one row per matrix row)
            flat = arrow_column(np.ascontiguousarray(value).reshape(-1))
            columns[name] = pa.FixedSizeListArray.from_arrays(flat, value.shape[1])
        else:
            columns[name] = arrow_column(value)
    lengths = {name: len(column) for name, column in columns.items()}
    if len(set(lengths.values())) > 1:
        raise DevicepipeError(f"{where}: every column needs one length, got {lengths}.")
    return pa.table(columns)


def _write_parts(
    data: pa.Table | Mapping[str, Any] | Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    open_writer: Callable[[str, pa.Schema], Any],
    schema_of: Callable[[pa.Schema], pa.Schema] = lambda schema: schema,
    where: str = "write_parquet()",
    **write_options: Any,
) -> Path:
    """Write ``data`` (a table, a mapping of columns, or an iterable of mappings with the same
    columns, each in memory only while it is written) atomically with the writer
    ``open_writer(path, schema)`` opens for the first part's schema (``schema_of`` of it), each
    part by its ``write_table(table, **write_options)``."""
    parts = [data] if isinstance(data, (pa.Table, Mapping)) else data
    with atomic_path(path) as tmp:
        writer, schema = None, None
        try:
            for part in parts:
                table = _to_table(part, where, matrices=where != "write_csv()")
                if writer is None:
                    schema = schema_of(table.schema)
                    writer = open_writer(str(tmp), schema)
                writer.write_table(table.cast(schema), **write_options)
            if writer is None:
                raise DevicepipeError(
                    f"{where}: cannot write {Path(path).name}: no table (an empty iterable of parts)."
                )
        finally:
            if writer is not None:
                writer.close()
    return Path(path)


def write_parquet(
    data: pa.Table | Mapping[str, Any] | Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    sampling_rate: float | None = None,
) -> Path:
    """Write a table (or a mapping of column name to 1-D/2-D array or tensor) as Parquet, atomically.

    ``data`` may also be an iterable of such mappings with the same columns, written one after
    another: a long table a part at a time, each part in memory only while it is written.
    ``sampling_rate`` (Hz) is stored in the schema metadata and read back by ``read_series``.
    """
    rate = None if sampling_rate is None else hertz(sampling_rate, "write_parquet()")  # (not a file stating no rate)

    def with_rate(schema: pa.Schema) -> pa.Schema:
        if rate is None:
            return schema
        return schema.with_metadata({**(schema.metadata or {}), SAMPLING_RATE_KEY: repr(rate).encode()})

    def open_writer(tmp: str, schema: pa.Schema) -> pq.ParquetWriter:
        return pq.ParquetWriter(tmp, schema, write_page_checksum=True)  # readers can tell a damaged page

    # row groups of ROW_GROUP rows keep the encoder's buffers small
    return _write_parts(data, path, open_writer, with_rate, row_group_size=ROW_GROUP)


def write_csv(data: pa.Table | Mapping[str, Any] | Iterable[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write a table (or a mapping of column name to 1-D array or tensor) as CSV with a header,
    atomically; or an iterable of such mappings with the same columns, one after another (see
    :func:`write_parquet`)."""
    options = pacsv.WriteOptions(quoting_style="needed")
    return _write_parts(
        data, path, lambda tmp, schema: pacsv.CSVWriter(tmp, schema, write_options=options), where="write_csv()"
    )


def write_npy(array: Any, path: str | os.PathLike[str]) -> Path:
    """Write an array or tensor as ``.npy``, atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, np.asarray(_host(array)))
    return Path(path)


def write_json(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Write a strict JSON document (indented, UTF-8), atomically: NaN and infinities, which JSON
    cannot hold, are written as ``null``."""
    text = json.dumps(_finite(obj), indent=2, default=lambda v: _finite(_json_default(v)), allow_nan=False)
    with atomic_path(path) as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")
    return Path(path)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (also inside lists and dicts) replaced by None."""
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def write_torch(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Write a ``torch.save`` file (a checkpoint), atomically."""
    buffer = io.BytesIO()  # serialised first: torch.save's own writer fails on a full disk with a RuntimeError
    torch.save(obj, buffer)
    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(buffer.getbuffer())
    return Path(path)


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return _host(value).tolist()
    if isinstance(value, (Path, np.datetime64, torch.device, torch.dtype)):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


#: The lock file of a run directory ``out`` is ``.{out's name}`` + this, beside ``out``.
LOCK_SUFFIX = ".devicepipe-lock"

#: Times a lock is taken again when the file it locked was removed meanwhile (by the run that
#: held it, ending): then it is another file, and another run may hold that one.
LOCK_TRIES = 20


def lock_path(out: str | os.PathLike[str]) -> Path:
    """The lock file of the run directory ``out`` (see :func:`output_lock`): beside it, in the
    folder the user chose, so every run into ``out`` finds it, whoever runs it and whatever its
    temporary folder. Where ``out`` is a folder in a folder the user cannot write, inside ``out``."""
    target = Path(out).expanduser().resolve()
    beside = target.parent / f".{target.name}{LOCK_SUFFIX}"
    if target.is_dir() and beside.parent.exists() and not os.access(beside.parent, os.W_OK):
        return target / LOCK_SUFFIX  # (a folder of its own in a folder the user cannot write: inside it)
    return beside


#: What makes a folder a run directory (a single run's or a folder run's): a run into a folder
#: inside one holds that one's lock shared, so no run into it starts meanwhile.
RUN_MARKERS = ("summary.json", "settings.json")


@contextlib.contextmanager
def output_lock(out: str | os.PathLike[str], *, within: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Hold the lock on the run directory ``out`` while the block runs: a second run into the
    same directory (another process, another user, or another call in this one) is refused with
    one line instead of the two replacing each other's files. The lock is an empty file beside
    ``out`` (:func:`lock_path`), opened without following a symbolic link and never written, released
    (and removed) when the block ends, however it ends, and by the system if the process dies.
    Folders it had to make for ``out`` are removed again if the block leaves them empty. (On a
    system without ``fcntl``, Windows, runs are not locked.)

    Runs nest: a run into a folder inside another run's directory (a recording's folder of a
    folder run) is refused while that run writes, and holds the locks of the run directories
    above it shared (those with a lock file, or with a run's ``summary.json`` or ``settings.json``),
    so no run into one of them starts meanwhile. ``within`` is the directory of the folder run
    this one is part of: it and the folders above it are that run's to check."""
    try:
        import fcntl  # noqa: PLC0415 - POSIX only: elsewhere runs are not locked
    except ImportError:
        yield
        return
    target, path = Path(out).expanduser().resolve(), lock_path(out)
    made = _make_parents(path.parent, out)
    try:
        with contextlib.ExitStack() as held:
            for above in _run_dirs_above(target, within):
                held.enter_context(_shared_lock(above, target, fcntl))
            fd = _locked_file(path, target, fcntl)
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    if _same_file(fd, path):
                        path.unlink()
                os.close(fd)
    finally:
        for folder in made:  # the innermost first
            with contextlib.suppress(OSError):
                folder.rmdir()  # (only where the run left it empty)


def _run_dirs_above(target: Path, within: str | os.PathLike[str] | None) -> list[Path]:
    """The folders above ``target`` (below ``within``, where given) that are, or may be, run
    directories: with a lock file (a run writes there now) or a run's files."""
    stop = Path(within).expanduser().resolve() if within is not None else None
    found = []
    for above in target.parents:
        if stop is not None and (above == stop or stop.is_relative_to(above)):
            break
        if lock_path(above).exists() or any((above / name).is_file() for name in RUN_MARKERS):
            found.append(above)
    return found


@contextlib.contextmanager
def _shared_lock(above: Path, target: Path, fcntl: Any) -> Iterator[None]:
    """Hold the lock of the run directory ``above`` shared (``target`` is inside it): refused
    while a run into ``above`` writes; a run into ``above`` is refused meanwhile."""
    path = lock_path(above)
    for _ in range(LOCK_TRIES):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError:
            yield  # (a lock file that cannot be opened: a symbolic link, another user's folder)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputError(
                f"another devicepipe run is writing to {above}, which holds {target}",
                fix="wait for it to end, or choose an {out} outside it.",
                param="out",
            ) from None
        if _same_file(fd, path):
            break
        os.close(fd)  # removed as its holder ended: the one there now
    else:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # the last holder removes it
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _same_file(fd, path):
                path.unlink()
        os.close(fd)


def _make_parents(folder: Path, out: str | os.PathLike[str]) -> list[Path]:
    """Make ``folder`` and the folders above it that are missing; those made, innermost first."""
    missing = []
    at = folder
    while not at.exists() and at != at.parent:
        missing.append(at)
        at = at.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"cannot write in {folder} ({exc.strerror or exc})", fix="choose another {out}.", param="out"
        ) from None
    return missing


def _locked_file(path: Path, target: Path, fcntl: Any) -> int:
    """A descriptor of ``path`` holding its exclusive lock (a symbolic link there is refused, and
    the file is never written); a clear error where another run holds it."""
    for _ in range(LOCK_TRIES):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            if path.is_symlink():
                raise OutputError(
                    f"the lock file {path} of {target} is a symbolic link, which a run never follows",
                    fix="remove it, or choose another {out}.",
                    param="out",
                ) from None
            raise OutputError(
                f"cannot take the lock {path} of {target} ({exc.strerror or exc})",
                fix="choose another {out}.",
                param="out",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputError(
                f"another devicepipe run is writing to {target}", fix="wait for it to end, or choose another {out}.",
                param="out",
            ) from None  # fmt: skip
        if _same_file(fd, path):
            return fd
        os.close(fd)  # the file was removed as its holder ended: lock the one there now
    raise OutputError(f"cannot take the lock {path} of {target}: it keeps being replaced", fix="try again.")


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not removed, nor replaced)."""
    try:
        now, held = os.lstat(path), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


F = TypeVar("F", bound=Callable[..., Any])


def holds_output(run: F) -> F:
    """``run(source, out, ...)`` holding :func:`output_lock` on ``out`` (under ``torchrun``, on
    rank 0 only: every rank of one run writes to one directory). ``run.__wrapped__`` is the run
    without it, for a folder run's recordings, which hold :func:`writing_output` ``within`` it."""

    @functools.wraps(run)
    def locked(source: Any, out: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Any:
        if int(os.environ.get("RANK", "0") or 0) != 0:
            return run(source, out, *args, **kwargs)
        with writing_output(out):
            return run(source, out, *args, **kwargs)

    return locked  # type: ignore[return-value]


@contextlib.contextmanager
def writing_output(out: str | os.PathLike[str], *, within: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """What a run into ``out`` holds while it writes: :func:`output_lock` (``within`` a folder run's
    directory, for one of its recordings) and :func:`nothing_partial_on_full_disk`."""
    with output_lock(out, within=within), nothing_partial_on_full_disk(out):
        yield


@contextlib.contextmanager
def nothing_partial_on_full_disk(out: str | os.PathLike[str]) -> Iterator[None]:
    """Run the block; if it fails because the disk is full, remove what it added to ``out`` (the
    whole directory, if the block made it), so no run directory is left half-written. Files that
    were there before are left as they are (each was replaced whole, or not at all)."""
    target = Path(out).expanduser()
    before = {p.name for p in target.iterdir()} if target.is_dir() else None
    try:
        yield
    except BaseException as exc:
        if is_disk_full(exc) and target.is_dir():
            if before is None:
                shutil.rmtree(target, ignore_errors=True)
            else:
                for path in target.iterdir():
                    if path.name not in before:
                        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        raise
