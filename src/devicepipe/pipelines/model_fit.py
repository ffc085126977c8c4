"""Whether a model trained earlier fits the recording it scores, said as warnings.

A model flags a share of its own training rows (about its contamination). Scoring rows unlike
the ones it learned (another patient, lead, sampling rate, or unit) flags far more, and those
flags then say "unlike the training set", not "unusual here". The checks here compare what a
run can see against what the model recorded of its training, and word what differs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from devicepipe.anomaly import BeatAnomalyDetector
from devicepipe.learning.learn import SCORES_AT_STAKE, learning_failed
from devicepipe.scorers import SCORER_KINDS

#: A flagged share this many times the model's own (and at least :data:`MIN_EXCESS` above it)
#: is too many to be the model's usual rate by chance, given :data:`MAX_CHANCE`.
FLAG_RATIO = 3.0
MIN_EXCESS = 0.05
#: The largest chance (a Chernoff bound on the binomial tail) of so many flags from the model's
#: own flag rate at which the share is still taken as chance.
MAX_CHANCE = 1e-4
#: Rates further apart than this share are another sampling rate.
RATE_TOLERANCE = 0.02
#: Levels further apart than this factor are another unit or scale.
SCALE_FACTOR = 10.0


def own_flag_share(detector: BeatAnomalyDetector) -> float:
    """The share of the model's own training rows above its threshold (at least one row's share)."""
    train = detector.train_scores_
    n = int(train.numel())
    return max(float((train > detector.threshold_).sum()) / max(n, 1), 1.0 / max(n, 1))


def flag_share_warnings(
    detector: BeatAnomalyDetector,
    flags: np.ndarray,
    what: str = "beats",
    causes: str = "another patient, lead or sampling rate",
) -> list[str]:
    """A warning when the share of ``flags`` ``(n,)`` set is far above the model's own flag share:
    more than :data:`FLAG_RATIO` times it, :data:`MIN_EXCESS` above it, and with a chance under
    :data:`MAX_CHANCE` of coming from the model's own rate. ``causes``: what may differ, in words."""
    n, k = int(flags.size), int(np.count_nonzero(flags))
    own = own_flag_share(detector)
    share = k / n if n else 0.0
    if n < 20 or share <= max(FLAG_RATIO * own, own + MIN_EXCESS):
        return []
    if share < 1.0:  # Kullback-Leibler divergence of the two shares: P(X >= k) <= exp(-n KL)
        kl = share * math.log(share / own) + (1 - share) * math.log((1 - share) / (1 - own))
    else:
        kl = -math.log(own)
    if math.exp(-n * kl) > MAX_CHANCE:
        return []
    return [
        f"{100 * share:.0f} % of the {what} were flagged, where {100 * own:.1f} % of the model's own training "
        f"{what} score above its threshold: these {what} are unlike the ones it learned ({causes}?), so the flags "
        f"say that rather than which {what} are unusual here; train a model on recordings like this one"
    ]


def rate_fit_warnings(geometry: dict[str, Any], sampling_rate: float) -> list[str]:
    """A warning when the recording's rate (Hz) is not the one the model's training recordings had."""
    trained = geometry.get("trained_at_hz")
    if not isinstance(trained, (int, float)) or not trained or not math.isfinite(sampling_rate):
        return []
    if abs(sampling_rate - trained) <= RATE_TOLERANCE * trained:
        return []
    return [
        f"the model was trained on recordings at {trained:g} Hz and this one is at {sampling_rate:g} Hz: beats are "
        "resampled to the model's width, but found and filtered at another rate they differ in shape, and the "
        "scores can shift"
    ]


def scale_fit_warnings(detector: BeatAnomalyDetector, values: np.ndarray, unit: str = "") -> list[str]:
    """A warning when the level of ``values`` (the raw rows) is more than :data:`SCALE_FACTOR`
    times away from the level of the rows the model's scaler was fitted on."""
    scaler = detector.scaler_
    if scaler is None:
        return []
    if hasattr(scaler, "data_min_"):
        trained = float((scaler.data_min_ + scaler.data_max_).reshape(-1)[0]) / 2
    elif hasattr(scaler, "mean_"):
        trained = float(scaler.mean_.reshape(-1)[0])
    else:
        return []
    finite = values[np.isfinite(values)]
    if not finite.size or trained <= 0:
        return []
    level = float(np.median(finite))
    if level <= 0 or 1 / SCALE_FACTOR <= level / trained <= SCALE_FACTOR:
        return []
    unit_words = f" {unit}" if unit else ""
    return [
        f"the values here (median {level:.4g}{unit_words}) are about {level / trained:.3g} times those the model was "
        f"trained on (about {trained:.4g}): another unit (kW against MW) or another kind of series? The model "
        "scores at its own scale, so most windows will look anomalous"
    ]


def failed_model_warnings(detector: BeatAnomalyDetector) -> list[str]:
    """A warning when the model was broken by its own training (its loss became NaN, grew by orders
    of magnitude or froze), from the histories its file keeps; none otherwise."""
    at_stake = SCORES_AT_STAKE if SCORER_KINDS[detector.scorer].uses_model else "the figures drawn from it"
    failed = learning_failed(getattr(detector, "histories_", None) or [], None, at_stake)
    return [] if failed is None else [f"the model given was broken in training: {failed}"]
