"""The ``devicepipe`` command's entry point, and ``python -m devicepipe``.

It registers the process's last exit handler before importing the command (whose libraries
register theirs on import): when the command ends, the process ends right after their exit
handlers, without the interpreter's teardown (:func:`devicepipe.prestart.end_after_exit_handlers`).
Importing this module imports nothing heavy; a local cluster's workers, which run the
command's script again, import it and nothing more.
"""

from __future__ import annotations

from devicepipe.prestart import end_after_exit_handlers


def main() -> None:
    """Run the ``devicepipe`` command (:func:`devicepipe.cli.main`) on ``sys.argv``."""
    arm = end_after_exit_handlers()
    from devicepipe.cli import main as command

    try:
        command()
    except SystemExit as exc:
        arm(exc.code)
        raise


if __name__ == "__main__":
    main()
