"""Reading recordings onto a device, and writing outputs atomically.

One module a concern:

- :mod:`~devicepipe.io.read`: :func:`read_series` (dispatch by source) and :class:`Recording`;
- :mod:`~devicepipe.io.tables`: CSV/TSV, Parquet and in-memory frames through Arrow;
- :mod:`~devicepipe.io.wfdb`: WFDB records and beat annotations;
- :mod:`~devicepipe.io.wfdb_plain`: plain WFDB records, read without wfdb's slow header parse;
- :mod:`~devicepipe.io.edf`: EDF, EDF+ and BDF recordings and their annotations;
- :mod:`~devicepipe.io.stacked`: :func:`read_stacked`, many short recordings of one length in one tensor;
- :mod:`~devicepipe.io.chunks`: a recording's length from its header, and its samples a chunk at a time;
- :mod:`~devicepipe.io.reference`: reference beats from annotations or tables;
- :mod:`~devicepipe.io.timeline`: ordering by a time column, duplicates, gaps, the NaN policy;
- :mod:`~devicepipe.io.raw`: what every reader returns, and column choice;
- :mod:`~devicepipe.io.write`: atomic files (and checkpoints), staged run directories, output checks.
"""

from devicepipe.io.read import OverrideRate, Recording, read_series
from devicepipe.io.reference import ReferenceBeats, ReferenceDays, read_reference, read_reference_days
from devicepipe.io.stacked import StackedRecordings, read_stacked
from devicepipe.io.tables import SAMPLING_RATE_KEY
from devicepipe.io.timeline import DUPLICATE_POLICIES, NAN_POLICIES, TimeReport
from devicepipe.io.wfdb import (
    BEAT_SYMBOLS,
    DETECTOR_EXTENSION,
    BeatAnnotations,
    read_beat_annotations,
    write_beat_annotations,
)
from devicepipe.io.write import (
    atomic_path,
    check_output_dir,
    staged_dir,
    sweep_leftovers,
    write_csv,
    write_json,
    write_npy,
    write_parquet,
)

__all__ = [  # by name, whatever the case
    "atomic_path",
    "BEAT_SYMBOLS",
    "BeatAnnotations",
    "check_output_dir",
    "DETECTOR_EXTENSION",
    "DUPLICATE_POLICIES",
    "NAN_POLICIES",
    "read_beat_annotations",
    "read_reference",
    "read_reference_days",
    "write_beat_annotations",
    "read_series",
    "read_stacked",
    "OverrideRate",
    "Recording",
    "ReferenceBeats",
    "ReferenceDays",
    "SAMPLING_RATE_KEY",
    "StackedRecordings",
    "staged_dir",
    "sweep_leftovers",
    "TimeReport",
    "write_csv",
    "write_json",
    "write_npy",
    "write_parquet",
]
