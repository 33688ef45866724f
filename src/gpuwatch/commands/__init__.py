"""The commands that put sizing's physics and tco's dollars in front of a user.

``gpuwatch size`` prints what a workload needs and which GPUs hold it (`gpuwatch.sizing`)
beside what each costs per token, rented and owned (`gpuwatch.tco`); ``gpuwatch tco``
prices owning a catalog GPU against renting it. A command that prints both belongs to
neither package: in sizing it would make sizing import tco, in tco it would drag the
argparse and rich output into the cost model the agent imports. So the commands sit
here, above both, and `sizing` and `tco` stay libraries with no command, output or
flags in them.

`size` and `tco` are the commands (argparse, exit codes, one-line errors), `size_output`
what ``gpuwatch size`` prints (its JSON object and 80-column text). `gpuwatch.cli`
imports them on first use, so the agent (``gpuwatch run``) never loads them
(tests/test_plain_imports.py). What must not live here: arithmetic a library caller
needs (that is sizing's or tco's), anything the agent imports.
"""
