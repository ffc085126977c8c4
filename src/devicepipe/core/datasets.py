"""Whether a path names many recordings (a dataset) or one: the test the commands, the folder
runs and the worker start-up share. Imports nothing but the standard library, so that a command
line can be read before anything heavy is imported (:mod:`devicepipe.startup.server`)."""

from __future__ import annotations

import glob
import os
from pathlib import Path

__all__ = ["LIST_SUFFIXES", "is_dataset"]

#: Suffixes of a text file that lists recordings, one path a line.
LIST_SUFFIXES = (".txt", ".lst", ".list")


def is_dataset(spec: str | os.PathLike[str]) -> bool:
    """Whether ``spec`` names many recordings: a folder, a list file (``.txt``, ``.lst``,
    ``.list``) or a glob pattern that matches no file of its own name."""
    path = Path(spec)
    try:
        if path.is_dir():
            return True
        if path.is_file():
            return path.suffix.lower() in LIST_SUFFIXES
    except OSError:  # a name the file system cannot look up (too long): one recording, which says so
        return False
    return glob.has_magic(str(spec))
