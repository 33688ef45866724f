"""Data sources, one per module (and `attribution_join`, the attribution collector's pure
join of kubelet holds with NVML processes; `listing`, the off-tick refresh the attribution
and Slurm sources share), run on the agent's scheduler; `registry.SOURCES` is
their table (name, class, on by default, what turns it on), which the agent's wiring
reads. What must not live here: analysis, cost or rendering (the engines and
`gpuwatch.export` do that), and any import of the kubelet client outside `attribution`.

Each source runs inside `timed()`, which turns its outcome into a `CollectorResult`
(exported as `gpuwatch_collector_success` and `..._duration_seconds`), so one failing
source never breaks a scrape or the other sources.

Which sources exist, their classes, whether each is on by default and when it runs:
`registry.SOURCES`. The tick's derived stages (attribution's join, analysis, cost) are
reported the same way, by `gpuwatch.agent.pipeline`.

billing and tokens report their own health (`gpuwatch_billing_up{source}`,
`gpuwatch_token_source_up{source}`) because each has several independent sources.

Layer: with export, history and simulate, above config, below plan, report and the
agent that wires them; they import the sources and the analysis, never the agent.
"""
