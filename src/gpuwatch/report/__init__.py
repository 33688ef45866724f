"""`gpuwatch report`: the monthly GPU cost report.

One source module per place the figures come from (`local`: the host's history store;
`prometheus`: any Prometheus-compatible API for a fleet, read through
`gpuwatch.promapi`, with its queries in `prometheus_queries` and the recording rules in
`prometheus_rules`), each producing `ReportData` (`model.py`); one aggregation
(`build.py`) turning it into a `Report`; one module per output format; `produce.py`
loading, building and writing one report (for `gpuwatch.cli.report`, the command, and
`scheduled.py`). A new source or format is one file. No flags or exit codes here. The
fleet plan section comes from `gpuwatch.plan.make` (a library call, never the plan's
CLI); Slack delivery from `gpuwatch.slack`. Nothing else imports
this package but the CLI, and the agent never does.
"""
