"""Exceptions raised for user mistakes.

Every error a user can cause (a bad path, a misspelt column, a device that is not there)
raises :class:`DevicepipeError` with a one-sentence message that names the offending value
and, where obvious, the fix. The CLI turns these into one line on stderr and exit status 2.

A message names settings in the words of whoever made the call. The library writes them as
tokens in ``fix`` (and ``{param}`` in ``problem``), and :meth:`DevicepipeError.render` words
them for Python or for the command line:

==================  =======================  =================================
token               Python (``str(error)``)  command line (``error.cli_message``)
==================  =======================  =================================
``{lr}``            ``lr``                   ``--lr``
``{column=}``       ``column=``              ``--channel`` (or ``--column``)
``{device='cpu'}``  ``device='cpu'``         ``--device cpu`` (quoted for a shell where needed)
``{resume=True}``   ``resume=True``          ``--resume``
==================  =======================  =================================

On the command line a message also leaves out the function it names for a Python caller
(``read_series(): ``).
"""

from __future__ import annotations

import errno
import os
import re
import shlex
from collections.abc import Collection
from typing import Any

#: A setting named in a message: ``{name}``, ``{name=}`` or ``{name=value}``.
TOKEN = re.compile(r"\{([a-z][a-z0-9_]*)(=[^{}]*)?\}")

#: The function a message names for a Python caller (``read_series(): ...``), left out on the command line.
CALLER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\(\): ")

#: Library parameters whose command-line option has another name: the options it may be, the
#: first that the command has taken (``read_series``' column is an ECG command's ``--channel``).
CLI_NAMES: dict[str, tuple[str, ...]] = {
    "column": ("column", "channel"),
    "duration_s": ("duration",),
    "n_anomalies": ("anomalies",),
    "vt_bpm": ("vt-rate",),
    "noise_mV": ("noise",),
    "wander_mV": ("wander",),
}


def cli_flag(name: str, options: Collection[str] | None = None) -> str:
    """The long option of the library parameter ``name``: among ``options`` (a command's long
    options) when one of its names is there, else the first."""
    flags = ["--" + n.replace("_", "-") for n in CLI_NAMES.get(name, (name,))]
    return next((f for f in flags if options is not None and f in options), flags[0])


def render(text: str, *, cli: bool = False, options: Collection[str] | None = None) -> str:
    """``text`` with its setting tokens (see the module) in Python or command-line words."""

    def word(match: re.Match[str]) -> str:
        name, assigned = match.group(1), match.group(2)
        if not cli:
            return name + (assigned or "")
        flag = cli_flag(name, options)
        value = (assigned or "=")[1:]
        if value in ("", "True"):
            return flag
        return f"{flag} {shlex.quote(value.strip(chr(39) + chr(34)))}"

    return TOKEN.sub(word, text)


class DevicepipeError(ValueError):
    """A problem with the caller's input: the message says what and how to fix it.

    ``problem``: what is wrong (``{param}`` in it stands for the setting's name); ``fix``: what
    to do, with settings as tokens (see the module); ``param`` and ``value``: the setting at
    fault, by its Python name, and the value it had. ``str(error)`` is the message in Python
    words, :attr:`cli_message` in command-line words.
    """

    def __init__(self, problem: str, *, fix: str | None = None, param: str | None = None, value: Any = None) -> None:
        self.problem, self.fix, self.param, self.value = problem, fix, param, value
        super().__init__(self.render())

    def render(self, *, cli: bool = False, options: Collection[str] | None = None) -> str:
        """The message for Python, or (``cli``) for a command whose long options are ``options``."""
        problem = CALLER.sub("", self.problem) if cli else self.problem
        if self.param is not None:
            problem = problem.replace("{param}", cli_flag(self.param, options) if cli else self.param)
        if self.fix is None:
            return problem
        return f"{problem}; {render(self.fix, cli=cli, options=options)}"

    @property
    def cli_message(self) -> str:
        """The message with each setting named by its command-line option."""
        return self.render(cli=True)


class DeviceError(DevicepipeError):
    """A device specification that cannot be honoured on this machine."""


class ReadError(DevicepipeError):
    """A recording that cannot be read as asked."""


class OutputError(DevicepipeError):
    """An output location that cannot be written as asked (a file where a directory should be, ...)."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the user's quota on it) is full (NumPy's words too, and a
    devicepipe error that carries the system's)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc).lower()
    short_write = re.search(r"\d+ requested and \d+ written", text)  # NumPy's words when a write stops short
    return bool(short_write) or "not enough free space" in text or os.strerror(errno.ENOSPC).lower() in text
