"""Slack for every command that posts to it (`gpuwatch report`, `gpuwatch plan`, the
agent's alerts): a one-off summary through its own outbox (`summary.py`).

Transport only: no report, plan or alert wording lives here, and nothing of
`gpuwatch.report`, `gpuwatch.plan` or the CLI is imported; they import it.
"""
