"""Names as a terminal shows them: every control character visible, short, one line.

Process, host and GPU names come from NVML, the config or a scenario and may hold any
character, terminal escape sequences and newlines included. `gpuwatch.core.text.flatten`
(the one sanitiser every output uses) writes those as Python-style escapes (`\\x1b`,
`\\n`, `\\u202e`) so that a name can neither move the cursor, recolour the terminal nor
break a table line. Full names stay in
`gpuwatch status --json` (JSON-escaped there).
"""

from __future__ import annotations

import re

_INTERPRETER = re.compile(
    r"(python|pypy|ruby|perl|node|nodejs|bun|deno|julia|Rscript|bash|sh|dash|zsh)[\d.]*"
)
_OPTIONS_WITH_VALUE = frozenset({"-X", "-W", "-Q"})  # python's options that take a value
MAX_MODULE_CHARACTERS = 24


def _basename(word: str) -> str:
    stripped = word.rstrip("/")
    return stripped.rsplit("/", 1)[-1] if stripped else word


def _short_module(module: str) -> str:
    if len(module) <= MAX_MODULE_CHARACTERS or "." not in module:
        return module
    parts = module.split(".")
    return f"{parts[0]}…{parts[-1]}"


def short_process_name(command: str) -> str:
    """What a person calls the process: the program, or for an interpreter its script
    or `-m` module ("python3 -m vllm.entrypoints.openai.api_server --model x" gives
    "vllm…api_server"; "/usr/lib/xorg/Xorg" gives "Xorg"); "?" when NVML gave no name."""
    words = command.split()
    if not words:
        return "?"
    program = _basename(words[0])
    if not _INTERPRETER.fullmatch(program):
        return program
    rest = iter(words[1:])
    for word in rest:
        if word == "-m":
            module = next(rest, None)
            return program if module is None else _short_module(module)
        if word.startswith("-m") and len(word) > 2 and not word.startswith("--"):
            return _short_module(word[2:])
        if word == "-c":
            return program
        if word in _OPTIONS_WITH_VALUE:
            next(rest, None)
            continue
        if word.startswith("-"):
            continue
        return _basename(word)
    return program


def short_gpu_name(name: str) -> str:
    """The GPU's name without the "NVIDIA " every NVML name starts with."""
    return name.removeprefix("NVIDIA ").strip() or name or "?"
