"""Find the recordings a folder, a glob or a list file names (:func:`find_recordings`)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from devicepipe.core.datasets import LIST_SUFFIXES
from devicepipe.core.errors import DevicepipeError, OutputError
from devicepipe.io.formats import RECORDING_SUFFIXES

#: Files that sit beside recordings and are not recordings: ``simulate``'s ground truth.
SIDECAR_ENDINGS = (".truth.csv", ".events.csv")
#: The per-recording table of a dataset directory.
INDEX_NAME = "index.parquet"


@dataclass(frozen=True)
class Dataset:
    """Recordings to run, and the folder their run directories are named relative to."""

    paths: tuple[Path, ...]
    root: Path
    spec: str  # what the user named: a folder, a glob or a list file

    def run_names(self) -> list[str]:
        """Each recording's run directory, relative to the dataset directory: its path under
        :attr:`root` without the suffix (with the suffix, ``_csv``, where two would collide)."""
        plain = [_relative(p, self.root).with_suffix("").as_posix() for p in self.paths]
        counts: dict[str, int] = {}
        for name in plain:
            counts[name] = counts.get(name, 0) + 1
        names = [
            name if counts[name] == 1 else f"{name}_{p.suffix.lstrip('.').lower()}"
            for name, p in zip(plain, self.paths, strict=True)
        ]
        seen: set[str] = set()
        for i, name in enumerate(names):  # still equal (same names in unrelated folders): number them
            names[i] = name if name not in seen else f"{name}_{i}"
            seen.add(names[i])
        return names


def _relative(path: Path, root: Path) -> Path:
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        return Path(path.name)


def _is_recording(path: Path) -> bool:
    name = path.name.lower()
    return (
        path.is_file()
        and not name.startswith(".")
        and path.suffix.lower() in RECORDING_SUFFIXES
        and not name.endswith(SIDECAR_ENDINGS)
    )


def _in_a_run(folder: Path, top: Path, seen: dict[Path, bool]) -> bool:
    """Whether ``folder`` or a folder above it up to ``top`` (the folder searched) is a run
    directory (``seen``: the answers so far)."""
    levels = [folder, *folder.parents]
    for level in levels[: levels.index(top) + 1] if top in levels else [folder]:
        if level not in seen:
            seen[level] = (level / "summary.json").is_file() or (level / INDEX_NAME).is_file()
        if seen[level]:
            return True
    return False


def _fixed_part(pattern: str) -> Path:
    """The folder a glob pattern searches under: its parts before the first one with a wildcard."""
    parts = Path(pattern).parts
    fixed = parts[: next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts))]
    return Path(*fixed) if fixed else Path(".")


def _wfdb_header(path: Path) -> Path:
    """A WFDB record's ``.dat`` named in a glob stands for its ``.hea`` (one record, one entry)."""
    if path.suffix.lower() == ".dat" and path.with_suffix(".hea").is_file():
        return path.with_suffix(".hea")
    return path


def _names_a_file(path: Path) -> bool:
    """Whether ``path`` (a line of a list of recordings) names a file there is: itself, or a WFDB
    record's header; False for a name the file system cannot hold (that line fails on its own row)."""
    try:
        return path.exists() or Path(f"{path}.hea").exists()
    except OSError:
        return False


def _listed(path: Path) -> list[Path]:
    """The recordings a list file names, one a line (relative to its folder; ``#`` comments and
    blank lines ignored); a clear error for a file that cannot be read, or whose lines name no
    file that exists (a recording saved as ``.txt``, not a list)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        problem = f"cannot read the list of recordings {path} ({exc})"
        raise DevicepipeError(f"{problem}; give a UTF-8 text file.") from None
    entries = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    paths = [p if p.is_absolute() else path.parent / p for p in map(Path, entries)]
    if paths and not any(map(_names_a_file, paths)):
        raise DevicepipeError(
            f"none of the {len(paths):,} lines of {path} names a file that exists (the first: {entries[0]!r}), "
            f"so it is no list of recordings (one path a line); if {path.name} holds a recording, save it "
            f"as one of {', '.join(RECORDING_SUFFIXES)}."
        )
    return paths


def find_recordings(spec: str | os.PathLike[str], *, exclude: str | os.PathLike[str] | None = None) -> Dataset:
    """The recordings ``spec`` names, in a stable order.

    - a folder: every recording file under it, at any depth (:data:`RECORDING_SUFFIXES`; WFDB
      records by their ``.hea``; hidden files and ``simulate``'s ``*.truth.csv`` and ``*.events.csv`` left out);
    - a glob (``'data/**/*.hea'``, quoted so the shell leaves it): the recording files it
      matches (a ``.dat`` counts as its record);
    - a list file: one path per line, relative to the list file's folder, ``#`` comments and
      blank lines ignored; every path is kept (a missing one fails on its own row).

    ``exclude``: a folder whose contents are never taken (the output directory, when it lies
    inside the input folder); an :class:`OutputError` where it is the folder searched or holds
    it. A folder or glob never takes the files of a run directory (one holding a devicepipe
    ``summary.json`` or ``index.parquet``: its tables are outputs, not recordings). A clear
    :class:`DevicepipeError` when nothing is found.
    """
    text = str(spec)
    path = Path(spec)
    skip = None if exclude is None else Path(exclude).resolve()
    runs: dict[Path, bool] = {}

    searched = path if path.is_dir() else _fixed_part(text) if glob.has_magic(text) else None
    if skip is not None and searched is not None and searched.resolve().is_relative_to(skip):
        raise OutputError(
            f"{{param}} {exclude} is the folder of the recordings ({searched}) or one above it: the run would "
            "write among them, and takes nothing from its own output folder",
            fix=f"choose an {{out}} outside {searched} (e.g. {{out={searched.resolve().name or 'recordings'}-runs}}).",
            param="out",
        )

    def outside(p: Path, top: Path) -> bool:
        return (skip is None or not p.resolve().is_relative_to(skip)) and not _in_a_run(p.parent, top, runs)

    if path.is_dir():
        root = path
        paths = sorted(p for p in path.rglob("*") if _is_recording(p) and outside(p, path))
        where = f"folder {path}"
    elif path.is_file() and path.suffix.lower() in LIST_SUFFIXES:
        root, paths, where = path.parent, _listed(path), f"list {path}"
    elif glob.has_magic(text):
        found = {_wfdb_header(Path(p)) for p in glob.glob(text, recursive=True)}
        fixed = _fixed_part(text)
        paths = sorted(p for p in found if _is_recording(p) and outside(p, fixed))
        root = Path(os.path.commonpath([p.parent for p in paths])) if paths else Path(".")
        where = f"pattern {text!r}"
    else:
        raise DevicepipeError(f"{spec} is neither a folder, a list file ({', '.join(LIST_SUFFIXES)}) nor a pattern.")
    if not paths:
        raise DevicepipeError(
            f"no recordings found in {where}; recordings are files ending in {', '.join(RECORDING_SUFFIXES)}."
        )
    return Dataset(tuple(paths), root, text)
