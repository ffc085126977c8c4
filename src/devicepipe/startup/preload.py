"""What a local cluster's fork server imports once, before it forks the workers.

Dask's worker, torch, the pipelines and ``wfdb`` (which they import where first used),
imported with the cyclic garbage collector paused and then frozen
(:func:`devicepipe.startup.server.pause_collector`): every worker forked from the server starts with
them loaded, and its collections never trace them (nor touch, and so copy, the memory it
shares with the server); and Ctrl-C (SIGINT) ignored, which the workers inherit: the command
that started the cluster stops it. Importing this module does that; it defines nothing.
"""

from __future__ import annotations

import signal

from devicepipe.startup.server import pause_collector, resume_collector

# Ctrl-C reaches every process of the terminal's group. The command stops the cluster itself (and
# says how to resume); workers that died of the key first made the cluster log tracebacks.
# multiprocessing's fork server gives its children the handler found here, so they ignore it.
signal.signal(signal.SIGINT, signal.SIG_IGN)

_was_on = pause_collector()

import distributed  # noqa: E402, F401
import torch  # noqa: E402, F401

from devicepipe.io.wfdb import import_wfdb  # noqa: E402

import_wfdb()

import devicepipe.pipelines  # noqa: E402, F401

resume_collector(_was_on, freeze=True)
