"""Exceptions raised for user mistakes.

Every error a user can cause (a bad path, a misspelt column, a device that is not there)
raises :class:`DevicepipeError` with a one-sentence message that names the offending value
and, where obvious, the fix. The CLI turns these into one line on stderr and exit status 2.

The fix is worded for whoever made the call: ``str(error)`` names the Python argument
(``device="cpu"``), and ``error.cli_message`` the command-line option (``--device cpu``) where
the two differ.
"""

from __future__ import annotations


class DevicepipeError(ValueError):
    """A problem with the caller's input: the message says what and how to fix it.

    ``cli``: the same message with the fix in command-line words (default: the message).
    """

    def __init__(self, message: str, *, cli: str | None = None) -> None:
        super().__init__(message)
        self.cli_message = message if cli is None else cli


class DeviceError(DevicepipeError):
    """A device specification that cannot be honoured on this machine."""


class ReadError(DevicepipeError):
    """A recording that cannot be read as asked."""


class OutputError(DevicepipeError):
    """An output location that cannot be written as asked (a file where a directory should be, ...)."""
