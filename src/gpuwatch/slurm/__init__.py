"""Slurm as a source: which job (and step) holds each GPU of this node.

`config.py` is `[slurm]`; `evidence.py` parses what the node says (a process's
environment and cgroup, `squeue --json`, `gres.conf`), pure and tested on literals;
`queue.py` runs the one `squeue` per list interval. Nothing here reads NVML or decides a
verdict: `gpuwatch.collectors.slurm` joins this with the GPU samples. Loaded only when
`[slurm] enabled` (tests/test_plain_imports.py).
"""
