"""An anomaly detector with the conventions of scikit-learn and PyOD, and the model file that outlives a run.

:class:`BeatAnomalyDetector` trains a convolutional VAE (or the MLP autoencoder, or a vmap
ensemble of either) on rows that are normal, for their embeddings, and scores new rows by their
how well the nearest training rows rebuild them (``scorer="local"``, the default), or by their
distance to those rows (``"multiscale"`` and ``"knn"``), or by the model's
reconstruction error (``"reconstruction"``), or both (``"combined"``). It follows PyOD's
conventions, which scikit-learn's outlier detectors share in shape:

- ``fit(X)`` sets ``decision_scores_`` (every training row's score), ``threshold_`` and
  ``labels_`` (0 normal, 1 anomalous);
- ``decision_function(X)``: the anomaly score, higher is more anomalous (PyOD);
- ``score_samples(X)``: its negation, higher is more normal (scikit-learn's sign);
- ``predict(X)``: 0 or 1 by ``threshold_``; ``fit_predict(X)``;
- ``tail_probability(X)``: the score calibrated against the training rows, the share of
  training scores at or above each score (small is unusual);
- ``get_params``/``set_params`` as scikit-learn's ``BaseEstimator`` has them, so
  ``sklearn.base.clone`` works (scikit-learn itself is not needed).

scikit-learn's ``check_estimator`` (1.9.1) runs 47 checks on it (``device="cpu", epochs=2``,
with the ``knn`` and the ``reconstruction`` scorer alike): 41 pass, ``check_array_api_input`` is
skipped (it needs array-api-compat), and five fail, for these reasons:
``check_outliers_fit_predict`` and ``check_outliers_train`` (twice) want ``predict`` to
answer -1/1, where PyOD's 0/1 is kept (1 = anomaly, the label users of anomaly scores count);
``check_estimators_unfitted`` wants scikit-learn's own ``NotFittedError`` class (a
:class:`DevicepipeError` saying "not fitted yet" is raised; scikit-learn is not a
dependency); ``check_dtype_object`` wants NumPy's wording for a dict inside an object array.

``X`` is anything :func:`devicepipe.to_torch` takes (a NumPy array, a DataFrame, a tensor, a
:class:`devicepipe.ecg.Beats`), shape ``(n_rows, n_columns)``. Rows are resampled to the
model's width when it needs one (the VAE takes a power of two: 140 columns become 128) and
scaled by a scaler fitted on the training rows (``scaling``). Results come back as the input
came: a tensor on the detector's device for a tensor, NumPy arrays otherwise.

The threshold is taken from the training rows' scores (for the reconstruction error, the split
that trained the model, not the rows held out for early stopping; a distance leaves its own
row out, so every row counts), by one of three rules: ``threshold=`` a number given;
``contamination=c``, the ``1 - c`` quantile of the training scores; ``contamination="auto"``,
a robust rule: ``exp(median(log s) + 3 * 1.4826 * MAD(log s))`` over the training scores
``s`` (the 99.87th percentile if the log scores were normal; errors are skewed, their logs
much less so), which does not assume a share of anomalies.

:meth:`BeatAnomalyDetector.save` writes one file of tensors and plain data (weights, scaler,
threshold, the sorted training scores, settings, versions, the input geometry);
:func:`load_model` reads it back with ``torch.load(weights_only=True)``, onto any device.

Where each part lives: the estimator in :mod:`.estimator`; the scorers and their
nearest-neighbour kernels in :mod:`devicepipe.scorers`; a score and a scorer in words in
:mod:`.describe`; the model file's format and writer in :mod:`.model_format`, and reading it back
(:func:`load_model`) in :mod:`.model_file`.
"""

from __future__ import annotations

from devicepipe.anomaly.estimator import BeatAnomalyDetector
from devicepipe.anomaly.model_file import load_model
from devicepipe.anomaly.model_format import MODEL_FORMAT, MODEL_FORMAT_VERSION
from devicepipe.artifacts.names import MODEL_NAME
from devicepipe.models.kinds import nearest_power_of_two
from devicepipe.scorers import SCORERS
from devicepipe.scorers.neighbours import (
    auto_threshold,
    knn_and_local,
    knn_distance,
    local_neighbours,
    local_residual,
    neighbours_for,
    row_pyramid,
    smallest,
)

__all__ = [
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "MODEL_NAME",
    "SCORERS",
    "BeatAnomalyDetector",
    "knn_and_local",
    "knn_distance",
    "local_neighbours",
    "local_residual",
    "neighbours_for",
    "row_pyramid",
    "auto_threshold",
    "load_model",
    "nearest_power_of_two",
    "smallest",
]
