"""The outbox's error, apart from the outbox: callers (the agent's wiring, the CLI) catch
it without importing `outbox.py` and with it sqlite3. Nothing else lives here.
"""

from __future__ import annotations


class OutboxError(Exception):
    """The outbox database cannot be opened or used; the message says where and why."""
