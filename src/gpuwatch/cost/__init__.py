"""Cost: each GPU's accrued cost and idle cost, realized $/1M tokens, rent vs buy, live.

Prices come from `gpuwatch.billing` (static, AWS Pricing, Cost Explorer, or the sizing
catalog as a labelled fallback); states from `gpuwatch.analysis`; tokens from
`gpuwatch.tokens`. Everything here is arithmetic over snapshots: no I/O.
"""
