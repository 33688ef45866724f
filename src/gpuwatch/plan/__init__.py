"""The fleet plan: the cheapest set of GPUs (whole, MIG profiles, time-sliced) that holds
every workload's measured need with headroom (`gpuwatch plan`; docs/plan.md).

`make.py` is the library call (`make_plan`) the command and the report both use;
`model.py` holds the plan's inputs and outputs, `mig.py` the MIG profile tables and their
placement rules, `solve.py` the optimisation (HiGHS through highspy, the optional
``plan`` extra), `local.py` and `prometheus.py` the workloads read from the local history
or a Prometheus-compatible API (`gpuwatch.promapi`), `usage.py` the units, and
`render.py` the plan in words, Markdown, HTML, JSON and Slack. The command (flags,
printing, files) is `gpuwatch.cli.plan`: nothing here parses flags or prints.

Nothing here imports `gpuwatch.report` (the report embeds the plan, not the other way
round); the agent never imports this package.
"""
