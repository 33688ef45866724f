"""A reader of standard output that goes away early (`gpuwatch size --json | head`): the
command ends quietly, as the Python docs' note on SIGPIPE recommends."""

from __future__ import annotations

import os
import select
import sys

EXIT_BROKEN_PIPE = 128 + 13
"""Exit status after standard output's reader went away: a shell's for SIGPIPE (141)."""


def reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (poll says POLLERR)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # closed, or not a file (a test's capture)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def silence() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush of what
    is still buffered raises nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
