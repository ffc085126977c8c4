"""The ``devicepipe`` command's entry point, and ``python -m devicepipe``: :func:`devicepipe.cli.main`."""

from __future__ import annotations

from devicepipe.cli import main

if __name__ == "__main__":
    main()
