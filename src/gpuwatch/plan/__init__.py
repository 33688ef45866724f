"""The fleet plan: the cheapest set of GPUs (whole, MIG profiles, time-sliced) that holds
every workload's measured need with headroom (`gpuwatch plan`; docs/plan.md).

`model.py` holds the plan's inputs and outputs, `mig.py` the MIG profile tables and their
placement rules, `solve.py` the optimisation (HiGHS through highspy, the optional
``plan`` extra), `inputs.py` the workloads read from the local history or Prometheus, and
`render.py` the plan in words, Markdown, HTML and JSON.
"""
