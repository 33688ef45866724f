"""State changes between two ticks' verdicts, worded for the log (one line each).

Names are data: a uuid is shown through `ascii()`, so control characters and escape
sequences from a driver never reach a terminal or a log parser raw.
"""

from __future__ import annotations

from gpuwatch.core.verdict import GpuVerdict


class StateChanges:
    """Remembers each GPU's last state and words what changed."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}

    def lines(self, verdicts: tuple[GpuVerdict, ...]) -> list[str]:
        """One line per GPU whose state differs from the previous tick's (none at first
        sight of a GPU: its first state is always `pending`)."""
        out = []
        for verdict in verdicts:
            before = self._states.get(verdict.uuid)
            self._states[verdict.uuid] = verdict.state
            if before is None or before == verdict.state:
                continue
            line = f"GPU {verdict.gpu_index} {verdict.uuid!a}: {before} -> {verdict.state}"
            if verdict.state in ("idle", "held"):
                line += f" (inactive for {verdict.inactive_seconds:.0f} s)"
            out.append(line)
        return out
