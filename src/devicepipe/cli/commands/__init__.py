"""The commands, one module each; importing this package registers every one of them on
:data:`devicepipe.cli.application.app`, in the order ``devicepipe --help`` lists them (so not sorted)."""

from devicepipe.cli.commands import info, read, simulate, beats, interop, ecg  # noqa: F401, I001 - registration
from devicepipe.cli.commands import score, train, series, demo, bench  # noqa: F401 - registration
