"""How a row's anomaly score is made: one module per scorer, behind :class:`~.base.Scorer`.

:data:`SCORER_KINDS` is the registry, by name; adding a scorer is one module and one line here.
The nearest-neighbour kernels the scorers share are in :mod:`.neighbours`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from devicepipe.scorers.base import Fitting, Reference, Scorer
from devicepipe.scorers.combined import CombinedScorer
from devicepipe.scorers.knn import KnnScorer
from devicepipe.scorers.local import LocalScorer
from devicepipe.scorers.multiscale import MultiscaleScorer
from devicepipe.scorers.reconstruction import ReconstructionScorer

#: Every scorer by name, the default first.
SCORER_KINDS: Mapping[str, Scorer] = MappingProxyType(
    {s.name: s for s in (LocalScorer(), MultiscaleScorer(), KnnScorer(), ReconstructionScorer(), CombinedScorer())}
)
#: The scorers' names (see :class:`devicepipe.anomaly.BeatAnomalyDetector`).
SCORERS = tuple(SCORER_KINDS)
#: The scorer of the estimator and of the ecg and series pipelines when none is named.
DEFAULT_SCORER = SCORERS[0]

__all__ = ["DEFAULT_SCORER", "SCORERS", "SCORER_KINDS", "Fitting", "Reference", "Scorer"]
