"""Logging: one line per event, text or JSON, configured once by the CLI (never at import)."""

from __future__ import annotations

import json
import logging
import sys


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(level: str = "info", fmt: str = "text") -> None:
    """Send gpuwatch's logs to stderr at `level` in `fmt` ("text" or "json")."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("gpuwatch")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    scheduler = logging.getLogger("apscheduler")  # a job's own exception, in our format
    scheduler.handlers[:] = [handler]
    scheduler.setLevel(logging.ERROR)
    scheduler.propagate = False
