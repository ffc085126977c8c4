"""``python -m devicepipe``: the same as the ``devicepipe`` command."""

from devicepipe.cli import main

if __name__ == "__main__":
    main()
