"""The stand-in as an older `nvidia-ml-py` would show it to the adapter.

`OldBinding(stand_in, module)` takes `module`, the `pynvml.py` of another binding
release, and hides every `nvml*` function that release does not have (AttributeError,
as with the real module), reads the running-process lists with that release's own
struct, and gives its process-info struct classes. Everything else (the calls, NVML's
exception classes) is the stand-in's.
"""

from __future__ import annotations

from typing import Any

_PROCESS_STRUCTS = ("c_nvmlProcessInfo_t", "c_nvmlProcessInfo_v2_t", "c_nvmlProcessInfo_v3_t")
_PROCESS_LISTS = {
    f"nvmlDeviceGet{kind}RunningProcesses{version}"
    for kind in ("Compute", "Graphics")
    for version in ("_v3", "_v2")
}


class OldBinding:
    """`stand_in` behind the attribute surface of the binding module `module`."""

    def __init__(self, stand_in: Any, module: Any) -> None:
        self._stand_in = stand_in
        self._module = module

    def __getattr__(self, name: str) -> Any:
        module = self._module
        if name in _PROCESS_STRUCTS:
            return getattr(module, name)  # AttributeError where the release lacks it
        if name.startswith("nvml") and not hasattr(module, name):
            raise AttributeError(f"this nvidia-ml-py has no attribute {name!r}")
        if name in _PROCESS_LISTS:
            return self._process_list(name)
        return getattr(self._stand_in, name)

    def _process_list(self, symbol: str) -> Any:
        """The release's wrapper: its own struct (12.535.x: `c_nvmlProcessInfo_t`)."""
        module = self._module
        if symbol.endswith("_v2"):
            struct = module.c_nvmlProcessInfo_v2_t
        else:
            struct = getattr(module, "c_nvmlProcessInfo_v3_t", None) or module.c_nvmlProcessInfo_t
        stand_in = self._stand_in
        return lambda handle: stand_in._binding_running(symbol, struct, handle)
