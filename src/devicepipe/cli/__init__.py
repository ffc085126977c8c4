"""The ``devicepipe`` command: parse arguments, call the library, print.

The command line is the only part of devicepipe that prints. User mistakes (a bad path, an
unknown column, a device that is not there, a malformed option) end as one line on stderr and
exit status 2 (:mod:`devicepipe.cli.application`). Each command is a module of
:mod:`devicepipe.cli.commands`; options shared by several are in :mod:`devicepipe.cli.options`,
what several print in :mod:`devicepipe.cli.printing`, the runs on many recordings in
:mod:`devicepipe.cli.many`.

Importing this package imports nothing heavy and starts nothing. :func:`main` imports the module
of the one command it is asked for (and with it torch), as pip does
(:data:`devicepipe.cli.application.COMMANDS`): ``devicepipe --version`` and ``--help`` import no
command and no torch. :data:`app`, first asked for, imports every command.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from devicepipe.startup.server import pause_collector, resume_collector, start_worker_server

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main"]


def _load_app(every: bool = True) -> typer.Typer:
    """The Typer application, with every command imported (``every``; else each is imported when
    it is asked for), the cyclic garbage collector paused meanwhile (see
    :func:`devicepipe.startup.server.pause_collector`)."""
    # PyTorch backs CPU buffers of 2 MB and more with transparent huge pages when this is set
    # (read once, at its first allocation, so before torch is used): a new full-length tensor
    # then costs one page fault per 2 MB instead of per 4 KB, as NumPy's allocator already does.
    # An explicit THP_MEM_ALLOC_ENABLE=0 in the environment turns it off.
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    # Arrow's buffers (tables read and written) from the C library's allocator, as everything else's,
    # not Arrow's default (mimalloc), which keeps what is freed to itself: a long recording's tables,
    # written a part at a time, left 15 MiB more resident after a week of beats than after an hour.
    # (Read at Arrow's first allocation; set in the environment, the user's choice stands.)
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    was_on = pause_collector()
    try:
        from devicepipe.cli.application import app as application

        if every:
            from devicepipe.cli.commands import load_all

            load_all()
    finally:
        resume_collector(was_on)
    return application


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``devicepipe`` command on ``argv`` (default: ``sys.argv[1:]``); ends with
    :class:`SystemExit` as any command line program does.

    A command on many recordings (``devicepipe beats FOLDER``) first starts its local Dask
    cluster's fork server, whose import of torch then runs beside this process's own
    (:func:`devicepipe.startup.server.start_worker_server`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    # Idle OpenMP threads sleep instead of spinning: on a busy machine a spinning thread takes a
    # core from the work (benchmarks/results/wait_policy.md: a 10 k-sample detection 25x faster
    # under two busy processes, at 1.4-1.6x slower on an idle machine). Read once, when the
    # OpenMP runtime starts (with torch, here or in the worker server below); set in the
    # environment, the user's choice stands.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    start_worker_server(["devicepipe", *args])
    application = _load_app(every=False)  # (a command's module is imported when it is asked for)
    application(args=args, prog_name="devicepipe")


def __getattr__(name: str) -> Any:
    if name == "app":
        return _load_app()
    raise AttributeError(f"module 'devicepipe.cli' has no attribute {name!r}")
