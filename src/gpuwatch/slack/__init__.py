"""Slack for everything that posts to it (the agent's alerts, `gpuwatch report`,
`gpuwatch plan`, `gpuwatch alert test`): the webhook URL kept secret (`secret.py`), one
HTTP attempt and the bounded retry policy (`transport.py`, the one module that imports
`slack_sdk`, lazily), the SQLite outbox (`outbox.py`), mrkdwn escaping and Slack's
limits (`mrkdwn.py`) and a one-off summary sent through an outbox (`summary.py`).

Transport only: no alert, report or plan wording lives here, and nothing of
`gpuwatch.alerts`, `gpuwatch.report`, `gpuwatch.plan` or the CLI is imported; they
import it.

Layer: a source (beside nvml, kube, tokens, billing, promapi), above core; alerts,
report, plan and the CLI are its users.
"""
