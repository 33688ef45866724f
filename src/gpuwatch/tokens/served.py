"""What model a server's served name is: its OpenAI-compatible /v1/models `root`.

vLLM (and SGLang) label their metrics with the *served* name, which
`--served-model-name` makes an alias ("chat") the sizing catalog cannot know. The
server's own /v1/models lists each served name as a card with `id` (the served name)
and `root` (the model path given to `--model`: a Hugging Face repository id or a local
folder) — vLLM's `OpenAIServingModels.show_available_models`
(vllm/entrypoints/openai/serving_models.py); a LoRA adapter's card has a `parent` and
its own `root` (the adapter's folder), so it is skipped. Pure: the URL and the parse;
the fetch is `gpuwatch.tokens.collector`'s.
"""

from __future__ import annotations

import json
import urllib.parse

MAX_NAME_CHARS = 4096
"""The longest served name or root kept (a path); longer ones are not names."""


def models_url(metrics_url: str) -> str:
    """The /v1/models URL beside a server's /metrics URL: same scheme, host and port, and
    the same path prefix when the metrics path ends in ``/metrics`` (a proxy's)."""
    parts = urllib.parse.urlsplit(metrics_url)
    prefix = parts.path[: -len("/metrics")] if parts.path.endswith("/metrics") else ""
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, f"{prefix}/v1/models", "", ""))


def model_roots(body: bytes) -> dict[str, str]:
    """{served name: root} of a /v1/models answer's base-model cards; {} when the body
    is not that shape (a server without the endpoint, an error page)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return {}
    cards = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(cards, list):
        return {}
    roots: dict[str, str] = {}
    for card in cards:
        if not isinstance(card, dict) or card.get("parent") is not None:
            continue
        served, root = card.get("id"), card.get("root")
        if (
            isinstance(served, str)
            and isinstance(root, str)
            and 0 < len(served) <= MAX_NAME_CHARS
            and 0 < len(root) <= MAX_NAME_CHARS
        ):
            roots[served] = root
    return roots
