"""Kubernetes attribution, pure pieces: device-ID and cgroup parsers, the kubelet's pod-log
folder, and the kubelet pod-resources client.

Nothing here knows about NVML or the agent; `gpuwatch.collectors.attribution` joins these
with NVML's processes. Every module is tested on its own (`tests/kube/`).
"""
