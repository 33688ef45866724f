"""Cost: each GPU's accrued cost and idle cost, realized $/1M tokens, rent vs buy, live.

`engine` turns a tick's prices and verdicts into the snapshot's `CostSummary`
(`gpuwatch.core.costs`); `ledger` accrues each GPU's cost and classed time in time
order, `history` checkpoints cumulative values for windows, `pods` splits a GPU's cost
among the pods on it. Prices come from `gpuwatch.billing` (static, AWS Pricing, Cost
Explorer, or the sizing catalog as a labelled fallback) through the agent; states from
`gpuwatch.analysis`; tokens from `gpuwatch.tokens`. Everything here is arithmetic over
snapshots: no I/O.

What must not live here: fetching prices or tokens (the sources'), the owned-cost model
(`gpuwatch.tco`), rendering (`gpuwatch.export`, the report), an import of
`gpuwatch.config`. Layer: cost, above analysis and tco, below config.
"""
