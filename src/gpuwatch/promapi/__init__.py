"""The Prometheus-compatible API, for every command that reads one (`gpuwatch report`,
`gpuwatch plan`): `client.py` (the HTTP client, its checks and its whole-run deadline,
`deadline.py`), `labels.py` (label keys, selectors, the host and pod of a series) and
`flags.py` (the `--prometheus-*` flags and the options they make).

Generic: no report or plan figure, no PromQL of theirs, and nothing of `gpuwatch.report`
or `gpuwatch.plan` is imported here; they import it.

Layer: a source (beside nvml, kube, tokens, billing, slack), above core; report and
plan, far above, are its users.
"""
