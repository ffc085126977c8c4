"""Exceptions raised for user mistakes.

Every error a user can cause (a bad path, a misspelt column, a device that is not there)
raises :class:`DevicepipeError` with a one-sentence message that names the offending value
and, where obvious, the fix. The CLI turns these into one line on stderr and exit status 2.
"""

from __future__ import annotations


class DevicepipeError(ValueError):
    """A problem with the caller's input: the message says what and how to fix it."""


class DeviceError(DevicepipeError):
    """A device specification that cannot be honoured on this machine."""


class ReadError(DevicepipeError):
    """A recording that cannot be read as asked."""


class OutputError(DevicepipeError):
    """An output location that cannot be written as asked (a file where a directory should be, ...)."""
