"""What the command line's user mistakes look like to a test: one line on stderr, exit status 2."""

from __future__ import annotations

from typing import Any


def one_line_error(result: Any, *patterns: str) -> None:
    """``result`` (a ``CliRunner`` result) ended with exit status 2 and one error line holding every pattern."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("devicepipe: error: "), result.stderr
    for pattern in patterns:
        assert pattern in lines[0], lines[0]
