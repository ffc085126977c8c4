"""The commands, one module each: importing one registers its command on
:data:`devicepipe.cli.application.app`. The command line imports a command's module only when
the command is asked for (:data:`devicepipe.cli.application.COMMANDS`); :func:`load_all` imports
every one (``devicepipe.cli.app``, for the tests and for a caller that wants them all)."""

from __future__ import annotations

__all__ = ["load_all"]


def load_all() -> None:
    """Import every command's module, in the order ``devicepipe --help`` lists them."""
    from devicepipe.cli.application import COMMANDS, load_command  # noqa: PLC0415 - (the table's own module)

    for name in COMMANDS:
        load_command(name)
