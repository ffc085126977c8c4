"""What every other part stands on: the device (``device``: resolving ``auto``, what the
machine has), threads (``threads``: the thread policy), units (``units``: durations and sizes),
arrays held on disk while a long recording is worked through (``spill``), and the library's
errors (``errors``: problem, fix, setting). Nothing here imports another part of devicepipe."""
