"""Test and benchmark tooling that the product never imports, kept out of the wheel.

Lives here: `synthetic` (a synthetic month of a fleet as Prometheus would have scraped
it, with its exact truth; `python -m tests.support.synthetic`), `counting` (NVML calls
counted at the library boundary, one tick's cost), `old_binding` (the pynvml stand-in
behind an older `nvidia-ml-py`'s attribute surface), `kube_node` (a simulated kubelet and
an agent listing it).

Must not live here: anything `src/gpuwatch` imports, or the demo fleet (that is
`gpuwatch.simulate`). Only tests/ and bench/ import this package.
"""
