"""Kubernetes attribution, pure pieces: device-ID and cgroup parsers, the kubelet's pod-log
folder, the kubelet pod-resources client and the `[kubernetes]` section (`config`).

Nothing here knows about NVML or the agent; `gpuwatch.collectors.attribution` joins these
with NVML's processes. Every module is tested on its own (`tests/kube/`). What must not
live here: the join itself, cost or export code, an import of `gpuwatch.config`.
Layer: a source (beside nvml, tokens, billing), above core; only core is imported.
"""
