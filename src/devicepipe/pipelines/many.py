"""How a pipeline runs a group of recordings of a dataset (:data:`RunGroup`), for
:data:`devicepipe.pipelines.registry.DATASET_PIPELINES`.

Each one runs a group of recordings (``paths[i]`` written to ``outs[i]``, scored against
``references[i]`` where there is one) with the pipeline's keyword ``options`` on ``device``, and
says per recording None (done) or the exception that stopped it: a bad recording never stops the
others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from devicepipe.learn import LearnSettings
from devicepipe.pipelines.beats import run_beats_many
from devicepipe.pipelines.beats_finish import BeatsOptions
from devicepipe.train import CHECKPOINT_NAME

__all__ = ["RunGroup"]

#: A pipeline run on a group of recordings: (paths, outs, references, options, device) -> outcomes.
RunGroup = Callable[
    [Sequence[Path], Sequence[Path], Sequence[str | None], dict[str, Any], str], list[BaseException | None]
]


def _beats_group(
    paths: Sequence[Path], outs: Sequence[Path], references: Sequence[str | None], options: dict[str, Any], device: str
) -> list[BaseException | None]:
    """The beats of equal-length recordings found in one batched call (:func:`run_beats_many`)."""
    results = run_beats_many(paths, outs, options=BeatsOptions(**options), references=references, device=device)
    return [r if isinstance(r, BaseException) else None for r in results]


def _resumable(options: dict[str, Any], out: Path) -> dict[str, Any]:
    """``options`` for the recording written to ``out``: a dataset's ``--resume`` continues the
    training a stopped run checkpointed there, and trains afresh where none began (stopped before
    this recording started, or before its first epoch ended)."""
    settings = options.get("settings")
    if isinstance(settings, LearnSettings) and settings.resume and not (out / CHECKPOINT_NAME).exists():
        return {**options, "settings": dataclasses.replace(settings, resume=False)}
    return options


def _one_at_a_time(run: Callable[..., Any]) -> RunGroup:
    """A pipeline of one recording, run on each of a group in turn."""

    def group(
        paths: Sequence[Path],
        outs: Sequence[Path],
        references: Sequence[str | None],
        options: dict[str, Any],
        device: str,
    ) -> list[BaseException | None]:
        outcomes: list[BaseException | None] = []
        for path, out, reference in zip(paths, outs, references, strict=True):
            try:
                run(path, out, device=device, reference=reference, **_resumable(options, Path(out)))
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - a bad recording never stops the batch
                outcomes.append(exc)
        return outcomes

    return group
