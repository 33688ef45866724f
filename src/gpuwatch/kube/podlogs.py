"""Pod UIDs to names from the kubelet's log folder, without the API server (no RBAC).

The kubelet writes each pod's logs under `/var/log/pods/<namespace>_<pod>_<uid>/
<container>/`. Namespace and pod names are DNS labels (no `_`), so the folder name
splits at its first and last `_`. Names are data: a folder name with bytes that are
not UTF-8 is read with those bytes escaped (`\\xNN`), never dropped or raised on.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True, slots=True)
class PodName:
    """A pod's namespace, name and container names, as the log folder shows them."""

    namespace: str
    pod: str
    containers: tuple[str, ...]


def _text(name: bytes) -> str:
    return name.decode("utf-8", "backslashreplace")


def parse_pod_dir(name: str | bytes) -> tuple[str, str, str] | None:
    """(namespace, pod, uid) of one `<namespace>_<pod>_<uid>` folder name, or None."""
    text = _text(name) if isinstance(name, bytes) else name
    first, last = text.find("_"), text.rfind("_")
    if first <= 0 or last <= first + 1:
        return None
    uid = text[last + 1 :]
    if not _UID.match(uid):
        return None
    return text[:first], text[first + 1 : last], uid


def scan_pod_logs(root: Path) -> dict[str, PodName]:
    """Every pod under `root` by UID; raises OSError when `root` cannot be listed.

    A folder that cannot be listed (a pod being removed) keeps no container names.
    """
    pods: dict[str, PodName] = {}
    with os.scandir(os.fsencode(root)) as entries:
        for entry in entries:
            parsed = parse_pod_dir(entry.name)
            if parsed is None or not entry.is_dir(follow_symlinks=False):
                continue
            namespace, pod, uid = parsed
            try:
                with os.scandir(entry.path) as inner:
                    containers = sorted(
                        _text(c.name) for c in inner if c.is_dir(follow_symlinks=False)
                    )
            except OSError:
                containers = []
            pods[uid] = PodName(namespace, pod, tuple(containers))
    return pods
