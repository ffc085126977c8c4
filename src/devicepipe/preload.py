"""What a local cluster's fork server imports once, before it forks the workers.

Dask's worker, torch, the pipelines and ``wfdb`` (which they import where first used),
imported with the cyclic garbage collector paused and then frozen
(:func:`devicepipe.prestart.pause_collector`): every worker forked from the server starts with
them loaded, and its collections never trace them (nor touch, and so copy, the memory it
shares with the server). Importing this module does that; it defines nothing.
"""

from __future__ import annotations

from devicepipe.prestart import pause_collector, resume_collector

_was_on = pause_collector()

import distributed  # noqa: E402, F401
import torch  # noqa: E402, F401
import wfdb  # noqa: E402, F401

import devicepipe.pipelines  # noqa: E402, F401

resume_collector(_was_on, freeze=True)
