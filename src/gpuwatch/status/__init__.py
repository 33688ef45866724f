"""`gpuwatch status`: what the agent on this host says about its GPUs, readable at 80 columns.

`client` asks the running agent for `/status.json`; `local` makes a document without
one (one raw sample, or a simulated scenario replayed); `table` prints a document;
`names` makes names safe and short for a terminal. The document's shape lives with
the agent's endpoint in `gpuwatch.export.status_json`.

What must not live here: a second copy of the document's shape, sampling code (`local`
runs the agent's own tick), argparse (the CLI's). Layer: status, above the agent, below
the CLI; the agent never imports it.
"""

from gpuwatch.status.client import AgentAnswer, agent_url, fetch_status
from gpuwatch.status.table import render_table

__all__ = ["AgentAnswer", "agent_url", "fetch_status", "render_table"]
