"""`NvmlApi` names exactly what gpuwatch calls: the functions are `binding.FUNCTIONS`, the
installed pynvml has every member, and the stand-in implements every function itself."""

from __future__ import annotations

import pynvml

from gpuwatch.nvml.api import NvmlApi
from gpuwatch.nvml.binding import FUNCTIONS
from gpuwatch.simulate.stand_in import SimulatedNvml


def _members() -> set[str]:
    names = set(NvmlApi.__annotations__)
    names.update(name for name in vars(NvmlApi) if name.startswith(("nvml", "_nvml")))
    return names


def test_the_protocol_functions_are_the_binding_functions() -> None:
    functions = {
        name
        for name in _members()
        if name.startswith("nvml") and callable(getattr(NvmlApi, name, None))
    }
    assert functions == set(FUNCTIONS)


def test_pynvml_has_every_member() -> None:
    assert sorted(name for name in _members() if not hasattr(pynvml, name)) == []


def test_the_stand_in_implements_every_function() -> None:
    lacking = [name for name in FUNCTIONS if not hasattr(SimulatedNvml, name)]
    assert lacking == []
