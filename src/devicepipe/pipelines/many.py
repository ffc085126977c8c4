"""How a pipeline runs a group of recordings of a dataset (:data:`RunGroup`), for
:data:`devicepipe.pipelines.registry.DATASET_PIPELINES`.

Each one runs a group of recordings (``paths[i]`` written to ``outs[i]``, scored against
``references[i]`` where there is one) with the pipeline's keyword ``options`` on ``device``, and
says per recording None (done) or the exception that stopped it: a bad recording never stops the
others. Each recording's folder is locked while it is written (:func:`writing_output`), ``within``
the folder run's directory, whose lock the folder run holds: a single run writing to one of
those folders fails that recording, not the others.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from devicepipe.artifacts.names import CHECKPOINT_NAME
from devicepipe.core.errors import OutputError
from devicepipe.io.write import writing_output
from devicepipe.learning.learn import LearnSettings
from devicepipe.pipelines.beats import run_beats_many
from devicepipe.pipelines.beats_finish import BeatsOptions

__all__ = ["RunGroup"]

#: A pipeline run on a group of recordings of a folder run:
#: (paths, outs, references, options, device, the folder run's directory) -> outcomes.
RunGroup = Callable[
    [Sequence[Path], Sequence[Path], Sequence[str | None], dict[str, Any], str, Path], list[BaseException | None]
]


#: Recordings of a group whose beats are found in one batched call, their folders locked meanwhile
#: (a lock is an open file: a group of thousands at once would run out of them).
BATCHED_AT_ONCE = 256


def beats_group(
    paths: Sequence[Path],
    outs: Sequence[Path],
    references: Sequence[str | None],
    options: dict[str, Any],
    device: str,
    within: Path,
) -> list[BaseException | None]:
    """The beats of equal-length recordings found in batched calls (:func:`run_beats_many`),
    :data:`BATCHED_AT_ONCE` recordings at a time, each one's folder locked meanwhile."""
    outcomes: list[BaseException | None] = [None] * len(paths)
    for at in range(0, len(paths), BATCHED_AT_ONCE):
        with contextlib.ExitStack() as held:
            free = _lock_each(held, outs, range(at, min(at + BATCHED_AT_ONCE, len(paths))), within, outcomes)
            results = run_beats_many(
                [paths[i] for i in free],
                [outs[i] for i in free],
                options=BeatsOptions(**options),
                references=[references[i] for i in free],
                device=device,
            )
        for i, result in zip(free, results, strict=True):
            outcomes[i] = result if isinstance(result, BaseException) else None
    return outcomes


def _lock_each(
    held: contextlib.ExitStack, outs: Sequence[Path], which: range, within: Path, outcomes: list[BaseException | None]
) -> list[int]:
    """Lock the folder of each recording ``which`` names (:func:`writing_output`, held by ``held``):
    those locked. A recording whose folder another run writes fails: its outcome is why."""
    free = []
    for i in which:
        try:
            held.enter_context(writing_output(outs[i], within=within))
            free.append(i)
        except OutputError as exc:
            outcomes[i] = exc
    return free


def _resumable(options: dict[str, Any], out: Path) -> dict[str, Any]:
    """``options`` for the recording written to ``out``: a dataset's ``--resume`` continues the
    training a stopped run checkpointed there, and trains afresh where none began (stopped before
    this recording started, or before its first epoch ended)."""
    settings = options.get("settings")
    if isinstance(settings, LearnSettings) and settings.resume and not (out / CHECKPOINT_NAME).exists():
        return {**options, "settings": dataclasses.replace(settings, resume=False)}
    return options


def one_at_a_time(run: Callable[..., Any]) -> RunGroup:
    """A pipeline of one recording, run on each of a group in turn (``run`` holds its output's
    lock itself: :func:`~devicepipe.io.write.holds_output`, here ``within`` the folder run's)."""
    unlocked = getattr(run, "__wrapped__", run)

    def group(
        paths: Sequence[Path],
        outs: Sequence[Path],
        references: Sequence[str | None],
        options: dict[str, Any],
        device: str,
        within: Path,
    ) -> list[BaseException | None]:
        outcomes: list[BaseException | None] = []
        for path, out, reference in zip(paths, outs, references, strict=True):
            try:
                with writing_output(out, within=within):
                    unlocked(path, out, device=device, reference=reference, **_resumable(options, Path(out)))
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - a bad recording never stops the batch
                outcomes.append(exc)
        return outcomes

    return group
