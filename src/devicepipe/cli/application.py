"""The command's Typer application and how it ends: user mistakes as one line on stderr and exit status 2.

The commands are a table (:data:`COMMANDS`: each one's module and what it answers), as pip's
are: a command's module, and with it torch and the pipelines, is imported when the command is
asked for, so ``devicepipe --version`` and ``devicepipe --help`` import neither. Nothing here
imports torch.
"""

from __future__ import annotations

import difflib
import errno
import importlib
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from devicepipe import __version__
from devicepipe.core.errors import DevicepipeError, is_disk_full
from devicepipe.startup.server import pause_collector, resume_collector

#: Every command, in the order ``devicepipe --help`` lists them: the module of
#: :mod:`devicepipe.cli.commands` that defines it, and what it answers (its line in the help).
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("info", "Python, PyTorch, GPUs, CPU and optional libraries."),
    "read": ("read", "Summarise a recording read onto the device."),
    "simulate": ("simulate", "Write synthetic recordings with ground truth."),
    "beats": ("beats", "Heartbeats, each classed (N/S/V/F/Q), Holter events and AF."),
    "interop": ("interop", "Zero-copy conversions between your libraries."),
    "ecg": ("ecg", "Beats classed, Holter events and AF, a VAE, each beat scored."),
    "score": ("score", "Score new recordings with a model trained earlier."),
    "train": ("train", "Train one model of normal beats on many recordings."),
    "series": ("series", "Flag the unusual days of a load series, low (outages) or high (demand extremes)."),
    "demo": ("demo", "Run ecg on a simulated ECG: no data needed."),
    "bench": ("bench", "Time every stage on every device, against peers."),
}


def summary(name: str) -> str:
    """What the command ``name`` answers, in a line (its entry in ``devicepipe --help``)."""
    return COMMANDS[name][1]


def load_command(name: str) -> None:
    """Import the module of the command ``name`` (:data:`COMMANDS`), which registers it."""
    importlib.import_module(f"devicepipe.cli.commands.{COMMANDS[name][0]}")


class _PlainHelp:
    """Help in the usual shape: flags without a value placeholder, required arguments as ``INPUT``.

    Recent typer releases print ``<bool>`` beside every flag (as if it took a value) and
    ``{input}`` in the usage line; an empty metavar and Click's upper-case name undo both.
    """

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)  # type: ignore[misc]
        return [p[1:-1].upper() if p.startswith("{") and p.endswith("}") else p for p in pieces]


#: A value range as Click writes it in help (``x>=1``, ``1<=x<=64``), with the separator before it.
_RANGE = re.compile(r"(?:; )?(?:[-+\w.]+<=?)?x(?:[<>]=?[-+\w.]+)(?=;|\])")


def _without_range(text: str) -> str:
    """An option's help without the range Click appends: a value out of range gets an error naming it."""
    return re.sub(r"\s*\[\]", "", _RANGE.sub("", text).replace("[; ", "["))


class Command(_PlainHelp, TyperCommand):
    """A subcommand with :class:`_PlainHelp`, whose help gives each option in a line where it
    fits: names and value, help, default (details in docs/commands.md)."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args: list[tuple[str, str]] = []
        opts: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                (args if param.param_type_name == "argument" else opts).append((record[0], _without_range(record[1])))
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows, col_max=24)


#: The parameters that name a file the command reads (a recording or folder, a model, a reference).
INPUT_PARAMETERS = ("input", "model", "reference")


def _a_file_to_read(ctx: Any, param: Any, value: Any) -> Any:
    """Refuse an input that is neither a file nor a folder (a named pipe, a device, a socket):
    reading one would wait for a writer that may never come."""
    for path in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(path, Path) and path.exists() and not (path.is_file() or path.is_dir()):
            name = "--" + param.name if param.param_type_name == "option" else param.name.upper()
            raise DevicepipeError(
                f"{name} {path} is not a file nor a folder (a named pipe, a device or a socket), which a run "
                "would wait on for ever; give a file or a folder"
            )
    return value


def _reading_files_only(command: Any) -> None:
    """Check every input parameter of ``command`` (and of its subcommands) with :func:`_a_file_to_read`."""
    for sub in getattr(command, "commands", {}).values():
        _reading_files_only(sub)
    for param in getattr(command, "params", []):
        if param.name in INPUT_PARAMETERS and not getattr(param, "_reads_files_only", False):
            given = param.callback

            def checked(ctx: Any, p: Any, value: Any, given: Any = given) -> Any:
                value = _a_file_to_read(ctx, p, value)
                return given(ctx, p, value) if given is not None else value

            param.callback, param._reads_files_only = checked, True


class _OneLineErrors(_PlainHelp, TyperGroup):
    """Turn usage errors and DevicepipeErrors into one line on stderr and exit status 2."""

    def list_commands(self, ctx: Any) -> list[str]:
        if self is _top(ctx):  # every command in the table, loaded or not
            return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]
        return super().list_commands(ctx)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self is _top(ctx) and cmd_name in COMMANDS:
            self._load(cmd_name)
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _reading_files_only(command)
        return command

    def _load(self, name: str) -> None:
        """Import the command ``name`` where it is not yet, and make its Click command (a group's
        anew: its subcommands are registered as its module is imported)."""
        module = f"devicepipe.cli.commands.{COMMANDS[name][0]}"
        if module in sys.modules and name in self.commands and getattr(self.commands[name], "commands", True):
            return
        was_on = pause_collector()
        try:
            load_command(name)
        finally:  # what the import made lives as long as the command: no collection traces it again
            resume_collector(was_on, freeze=True)
        options: dict[str, Any] = {
            "pretty_exceptions_short": app.pretty_exceptions_short,
            "rich_markup_mode": app.rich_markup_mode,
        }
        for group in app.registered_groups:
            if group.name == name:
                built = typer.main.get_group_from_info(group, suggest_commands=True, **options)
                self.add_command(built, name)
        for info in app.registered_commands:
            if (info.name or typer.main.get_command_name(info.callback.__name__)) == name:  # type: ignore[union-attr]
                self.add_command(typer.main.get_command_from_info(info, **options), name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if self is _top(ctx) and args and args[0] not in COMMANDS and not args[0].startswith("-"):
            matches = difflib.get_close_matches(args[0], list(COMMANDS))  # (from the table: none loaded)
            if matches:
                ctx.fail(f"No such command {args[0]!r}. Did you mean {', '.join(repr(m) for m in matches)}?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands and what each answers, from :data:`COMMANDS` (none imported to say it)."""
        if self is not _top(ctx):
            super().format_commands(ctx, formatter)
            return
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])

    def _options_of(self, args: Any) -> set[str]:
        """The long options of the subcommand named in ``args`` (the command line when None)."""
        words = list(sys.argv[1:] if args is None else args)
        names = [w for w in words if not str(w).startswith("-")][:2]
        group: Any = self
        for name in names:
            command = group.commands.get(str(name)) if hasattr(group, "commands") else None
            if command is None:
                break
            group = command
        if group is self or not hasattr(group, "params"):
            return set()
        return {opt for param in group.params for opt in getattr(param, "opts", []) if opt.startswith("--")}

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _one_line_warning
                rv = super().main(
                    args=args,
                    prog_name=prog_name or "devicepipe",
                    complete_var=complete_var,
                    standalone_mode=False,
                    windows_expand_args=windows_expand_args,
                    **extra,
                )
        except KeyboardInterrupt:
            _stopped(self._options_of(args))
        except DevicepipeError as exc:
            _fail(exc.render(cli=True, options=self._options_of(args)))
        except MemoryError as exc:
            _fail(_out_of_memory(exc, self._options_of(args)))
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                _fail(f"a path is too long for the file system{_file_of(exc, 80)}; give a shorter one.")
            if not is_disk_full(exc):
                raise
            where = " or choose an --out on a disk with room" if "--out" in self._options_of(args) else ""
            _fail(f"the disk is full: {exc.strerror or exc}{_file_of(exc)}; free space{where}.")
        except Exception as exc:
            if isinstance(exc.__context__, KeyboardInterrupt):  # click's Abort: Ctrl-C
                _stopped(self._options_of(args))
            if _is_out_of_memory(exc):
                _fail(_out_of_memory(exc, self._options_of(args)))
            # click's UsageError/BadParameter (vendored by typer, so matched by shape)
            if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
                ctx = getattr(exc, "ctx", None)
                where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
                message = _expanded_pattern(exc.format_message()) or " ".join(exc.format_message().split())
                message = message.replace(": Value error, ", ": ")  # (the validator's own label of its ValueError)
                _fail(f"{_with_value_given(message, args)}{where}", int(exc.exit_code))
            if type(exc).__name__ == "Abort":
                sys.exit(1)
            raise
        if rv == CTRL_C:  # typer's Exit(130), returned: the command was stopped with Ctrl-C
            _stopped(self._options_of(args))
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


#: The exit status of a command stopped with Ctrl-C (128 + SIGINT, as a shell gives; typer's too).
CTRL_C = 130


def _with_value_given(message: str, args: Any) -> str:
    """A bound refused by the options' validator ("Invalid value for '--lr': Input should be less
    than or equal to 0.99") with the value that was given (", got nan"): for NaN, the bound it
    names is not what is wrong with it."""
    found = re.match(r"Invalid value for '(--[\w-]+)': Input should be", message)
    if not found:
        return message
    words = [str(w) for w in (sys.argv[1:] if args is None else args)]
    option = found.group(1)
    for i, word in enumerate(words):
        if word == option and i + 1 < len(words):
            return f"{message}, got {words[i + 1]}"
        if word.startswith(option + "="):
            return f"{message}, got {word.split('=', 1)[1]}"
    return message


def _expanded_pattern(message: str) -> str | None:
    """Click's "unexpected extra argument(s)" when they are paths that exist: the shell expanded an
    unquoted pattern (``data/*.hea``) into many inputs where a command takes one. Said so, with the
    fix, instead of the list of paths; None for any other message."""
    found = re.match(r"Got unexpected extra argument(?:s|\(s\))? \((.*)\)\s*$", " ".join(message.split()))
    if not found:
        return None
    extra = found.group(1).split(" ")
    if not all(Path(word).exists() for word in extra):
        return None
    folder = Path(extra[0]).parent
    return (
        f"{len(extra) + 1} inputs where one goes: the shell expanded an unquoted pattern into paths "
        f"({extra[0]}, ...); quote it ('{folder}/*{Path(extra[0]).suffix}') or give the folder ({folder})"
    )


def _stopped(options: set[str]) -> None:
    """End a command the user stopped with Ctrl-C: one line (how to go on, where the command can
    resume), exit status 130 as a shell gives."""
    again = "run the same command with --resume to go on from there" if "--resume" in options else "run it again"
    print(f"stopped (Ctrl-C): what was finished is kept; {again}.", file=sys.stderr)
    sys.exit(CTRL_C)


def _one_line_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """Show a warning raised while a command runs (the project's or a library's) as the command's
    own warnings look: one line on stderr, without the file, line and source that Python adds."""
    text = " ".join(str(message).split())
    print(f"warning: {text}", file=sys.stderr)


def _file_of(exc: OSError, width: int | None = None) -> str:
    """The file an OSError names, in parentheses (its first ``width`` characters), or nothing."""
    name = str(exc.filename) if exc.filename else ""
    if width is not None and len(name) > width:
        name = f"{name[: width - 3]}..."
    return f" ({name})" if name else ""


_OOM = re.compile(r"out of memory|can't allocate memory|not enough memory|failed to allocate", re.IGNORECASE)
_ASKED = re.compile(r"(?:tried to allocate|allocate) (\d[\d.,]*\s*(?:[KMGT]i?B|bytes))", re.IGNORECASE)


def _top(ctx: Any) -> Any:
    """The command line's top group (``devicepipe``) from a Click context."""
    return ctx.find_root().command


def _torch_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is PyTorch's out-of-memory error (torch is not imported to ask: an error
    it raised means it is)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(exc, torch.OutOfMemoryError)


def _is_out_of_memory(exc: BaseException) -> bool:
    return (
        isinstance(exc, MemoryError)
        or _torch_out_of_memory(exc)
        or (isinstance(exc, RuntimeError) and bool(_OOM.search(str(exc))))
    )


def _out_of_memory(exc: BaseException, options: set[str] | None = None) -> str:
    """One line for running out of memory: how much was asked for, and what to try with the
    options the command has (``options``: its long options)."""
    asked = _ASKED.search(str(exc))
    size = ""
    if asked:
        amount = asked.group(1)
        digits = amount.split()[0]
        size = f" (asked for {int(digits):,} bytes)" if digits.isdigit() else f" (asked for {amount})"
    gpu = _torch_out_of_memory(exc) or "CUDA" in str(exc)
    where = "the GPU" if gpu else "this machine"
    options = options or set()
    tries = []
    if "--duration" in options:
        tries.append("a shorter --duration")
    if "--chunk" in options:
        tries.append("--chunk 10min (the recording in pieces)")
    if "--memory-budget" in options:
        tries.append("a smaller --memory-budget")
    if "--batch-size" in options:
        tries.append("a smaller --batch-size")
    if gpu and "--device" in options:
        tries.append("--device cpu")
    fixes = ", ".join(["a shorter recording", *tries[:-1]]) + (f" or {tries[-1]}" if tries else "")
    return f"out of memory on {where}{size}: the data or the model does not fit; try {fixes}."


def _fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"devicepipe: error: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


app = typer.Typer(
    cls=_OneLineErrors,
    help="Device-resident pipelines for long recordings (ECG, load series), on a GPU when there is one.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
simulate_app = typer.Typer(
    cls=_OneLineErrors,
    help="Write synthetic recordings with ground truth (for trying things without data).",
    short_help=summary("simulate"),
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(simulate_app, name="simulate")


def _print_version(asked: bool) -> None:
    if asked:
        sys.stdout.write(f"devicepipe {__version__}\n")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True)
    ] = False,
) -> None:
    pass
