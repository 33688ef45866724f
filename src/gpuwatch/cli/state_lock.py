"""One agent per `agent.state_dir`.

Two agents sharing a state directory would both write the history's hours (each
restoring the other's windows) and both drain the Slack outbox, so `gpuwatch run` takes
an exclusive `flock` on `<state_dir>/agent.lock` before opening anything there. The
kernel drops the lock when the process ends, however it ends (kill -9 included), so a
crash never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = "agent.lock"


class StateDirBusyError(Exception):
    """Another live process holds the state directory's lock."""


class StateDirLock:
    """An exclusive lock on a state directory, held until `release()` or exit."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, state_dir: Path) -> StateDirLock:
        """Lock `state_dir` (created if missing) for this process and write its PID.

        StateDirBusyError names the holder's PID when another process has it; OSError
        when the lock file cannot be created at all.
        """
        state_dir.mkdir(parents=True, exist_ok=True)
        path = state_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "another process"
            raise StateDirBusyError(
                f"{state_dir} is in use by another gpuwatch agent ({who}); "
                "give each agent its own state_dir"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(fd, path)

    def release(self) -> None:
        """Drop the lock (idempotent); the file stays for the next agent."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_pid(fd: int) -> str:
    """The PID the holder wrote, or "" when unreadable; digits only (it is printed)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""
