"""Old nvidia-ml-py releases for the binding tests: fetched from PyPI, loaded side by side.

`python -m tests.bindings.fetch` (run by `make test`) downloads the wheels of `VERSIONS`
(about 40 KB each) into `.cache/nvidia-ml-py/`; `load(version)` imports a release's
`pynvml.py` from its wheel as a module of its own name, leaving `pynvml` alone.
"""

from __future__ import annotations

import subprocess
import sys
import types
import zipfile
from pathlib import Path

VERSIONS = ("12.535.77", "12.535.161", "12.560.30", "12.570.86")
"""The floor in pyproject.toml, the last R535 release (24-byte process struct), the last
without nvmlDeviceGetTemperatureV, and the first with every function the adapter calls."""

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "nvidia-ml-py"


def wheel(version: str) -> Path:
    """Where the wheel of `version` is kept."""
    return CACHE / f"nvidia_ml_py-{version}-py3-none-any.whl"


def fetch() -> list[str]:
    """Download the wheels not yet kept; the versions that could not be fetched."""
    CACHE.mkdir(parents=True, exist_ok=True)
    failed = []
    for version in VERSIONS:
        if wheel(version).is_file():
            continue
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        result = subprocess.run(
            [*pip, "--only-binary=:all:", "--dest", str(CACHE), f"nvidia-ml-py=={version}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0 or not wheel(version).is_file():
            failed.append(version)
    return failed


def load(version: str) -> types.ModuleType:
    """The `pynvml.py` of release `version` as the module `pynvml_<version>`."""
    name = "pynvml_" + version.replace(".", "_")
    if name in sys.modules:
        return sys.modules[name]
    with zipfile.ZipFile(wheel(version)) as archive:
        source = archive.read("pynvml.py").decode()
    module = types.ModuleType(name)
    module.__file__ = f"{wheel(version)}/pynvml.py"
    sys.modules[name] = module  # pynvml looks itself up there to add its error classes
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


if __name__ == "__main__":
    missing = fetch()
    if missing:
        sys.exit(f"could not download nvidia-ml-py {', '.join(missing)} from PyPI")
