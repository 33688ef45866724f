"""`gpuwatch report`: the monthly GPU cost report.

One source module per place the figures come from (`local`: the host's history store;
`prometheus`: any Prometheus-compatible API for a fleet), each producing `ReportData`
(`model.py`); one aggregation (`build.py`) turning it into a `Report`; one module per
output format. A new source or format is one file.
"""
