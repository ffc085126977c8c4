"""What a command does before it imports torch: start the worker processes' fork server early.

A command on many recordings (``devicepipe beats FOLDER``) starts a local Dask cluster whose
workers fork from a server that imports torch and the pipelines once (see
:func:`devicepipe.batch.run_recordings`). Started when the cluster starts, that import
comes after the command's own import of torch, and the command waits for both in turn.
Started here, from the command line alone and before the command imports anything heavy, the
two imports run side by side. Nothing here imports torch, NumPy or Dask.

The command's entry (:func:`devicepipe.cli.main`) calls :func:`start_worker_server` with its
command line before it imports any command; only the top process of a command line of the form
``devicepipe beats|ecg|score SPEC ...`` starts it, where ``SPEC`` (the first argument after the
command) names many recordings and neither ``--workers 0`` nor ``--scheduler`` is given; any
other command line starts nothing.

Importing torch, Dask and the pipelines makes over 200,000 objects that live as long as the
process. :func:`pause_collector` and :func:`resume_collector` keep the cyclic garbage collector
from tracing them again and again while they are made; frozen afterwards (:func:`gc.freeze`),
they are left out of every later collection, the several full ones of the interpreter's exit
included. A command's start and exit took 0.6 s less for this on the 2-core machine.

The server ends the ordinary way: when the command's process has ended, it sees the pipe it
watches close and leaves.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Sequence

from devicepipe.core.datasets import is_dataset

__all__ = [
    "DATASET_COMMANDS",
    "STARTED",
    "WORKER_PRELOAD",
    "pause_collector",
    "resume_collector",
    "start_worker_server",
    "starts_cluster",
]

#: The commands that take a folder, a glob or a list of recordings.
DATASET_COMMANDS = ("beats", "ecg", "score")
#: What the local cluster's fork server imports once, for every worker it forks: Dask's worker,
#: torch, the pipelines and wfdb (:mod:`devicepipe.startup.preload`).
WORKER_PRELOAD = ("devicepipe.startup.preload",)
#: Set in the environment of the process that started the server, so that the processes it
#: starts (which import the command's module again, with its command line) start none.
STARTED = "DEVICEPIPE_WORKER_SERVER_STARTED"


def pause_collector() -> bool:
    """Turn the cyclic garbage collector off for a run of imports; whether it was on (give that
    to :func:`resume_collector` after the imports)."""
    was_on = gc.isenabled()
    gc.disable()
    return was_on


def resume_collector(was_on: bool, *, freeze: bool = False) -> None:
    """Turn the collector back on where :func:`pause_collector` found it on; with ``freeze``,
    first move every object there is now out of the collector's sight for good
    (:func:`gc.freeze`): only where the process will not drop what it has so far."""
    if freeze:
        gc.freeze()
    if was_on:
        gc.enable()


def starts_cluster(argv: Sequence[str]) -> bool:
    """Whether the command line ``argv`` (``sys.argv``: the program, the command, its arguments)
    will start a local Dask cluster: a dataset command whose first argument names many
    recordings, without ``--workers 0`` or ``--scheduler``, and not asking for help."""
    if len(argv) < 3 or argv[1] not in DATASET_COMMANDS or argv[2].startswith("-"):
        return False
    args = list(argv[2:])
    if any(a in ("--help", "-h") or a == "--scheduler" or a.startswith("--scheduler=") for a in args):
        return False
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith("--workers=") else None
        if a == "--workers" and i + 1 < len(args):
            value = args[i + 1]
        if value is not None and value.strip().lstrip("+").isdigit() and int(value) == 0:
            return False
    return is_dataset(argv[2])


def start_worker_server(argv: Sequence[str]) -> bool:
    """Start the fork server of a local cluster's workers now, importing :data:`WORKER_PRELOAD`,
    when ``argv`` will start one (:func:`starts_cluster`), this is the command's top process and
    the platform forks from a server. Whether it was started."""
    if os.environ.get(STARTED) or multiprocessing.parent_process() is not None or not starts_cluster(argv):
        return False
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    from multiprocessing import forkserver

    os.environ[STARTED] = "1"  # before the server starts: it and the workers it forks inherit it
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(WORKER_PRELOAD))
    forkserver.ensure_running()
    return True
