"""How to install an optional part (an extra) of this gpuwatch: the one line a hint shows.

The distribution is `gpuwatch-fleet` (the import package and the command stay
`gpuwatch`): the name `gpuwatch` on PyPI is another project, so a hint never says
`pip install 'gpuwatch[...]'`. gpuwatch is installed from its source checkout, and pip
records where from (`direct_url.json`, PEP 610): the hint names that folder, and the
interpreter that runs this gpuwatch, so that it installs into the same environment.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

DISTRIBUTION = "gpuwatch-fleet"
"""This project's distribution name (`pyproject.toml`'s `project.name`)."""


def installed_from() -> Path | None:
    """The local folder or file this gpuwatch was installed from; None when unknown."""
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        url = urlsplit(json.loads(text)["url"]) if text else None
    except (metadata.PackageNotFoundError, ValueError, KeyError, TypeError):
        return None
    if url is None or url.scheme != "file":
        return None
    path = Path(unquote(url.path))
    return path if path.exists() else None


def install_hint(extra: str) -> str:
    """`<python> -m pip install '<source>[extra]'`, with the source checkout's path when
    pip recorded it, else `'.[extra]'` run in gpuwatch's source checkout."""
    source = installed_from()
    command = f"{sys.executable} -m pip install"
    if source is None:
        return f"{command} '.[{extra}]' in gpuwatch's source checkout ({DISTRIBUTION})"
    return f"{command} '{source}[{extra}]'"
