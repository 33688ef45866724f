"""The rich Console the commands print their tables with: a pipe does not cut them."""

from __future__ import annotations

import os
import sys

from rich.console import Console

PIPE_WIDTH = 10_000
"""Columns of a table written to a pipe or a file: wide enough that no cell is cut."""


class _StdoutConsole(Console):
    def on_broken_pipe(self) -> None:
        """Standard output's reader went away: raise, for the CLI's entry point to end
        quietly (rich's own answer exits 1)."""
        self.quiet = True
        raise BrokenPipeError


def stdout_console() -> Console:
    """A rich Console on standard output: the terminal's width on a terminal; when
    standard output is a pipe or a file, `COLUMNS` if set, else PIPE_WIDTH (tables at
    their natural width, no cell cut with "…")."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return _StdoutConsole()
    return _StdoutConsole(width=PIPE_WIDTH)
