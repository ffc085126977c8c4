"""The names of the files a learning run writes that other steps find by name: the model
(``devicepipe score --model RUN_DIR`` reads it), the training checkpoint (a resume reads it) and
a vmap ensemble's weights. Declared here, beside the other output files
(:data:`devicepipe.artifacts.ARTIFACTS`), so that what lists a run's files (the report, a
folder run) needs no import of the estimator or the training loop that write them."""

from __future__ import annotations

__all__ = ["CHECKPOINT_NAME", "ENSEMBLE_NAME", "MODEL_NAME"]

#: File name of the model a run writes (what ``devicepipe score --model RUN_DIR`` reads).
MODEL_NAME = "model.pt"
#: File name of a single model's training checkpoint in a run directory.
CHECKPOINT_NAME = "checkpoint.pt"
#: File name of a saved ensemble in a run directory (a single model's is ``checkpoint.pt``).
ENSEMBLE_NAME = "ensemble.pt"
