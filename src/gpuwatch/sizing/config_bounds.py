"""A config.json's size keys checked against `models.SIZE_BOUNDS` before anything is
built from them.

`ModelCatalogEntry` refuses an absurd size, but a config.json's sizes are used first:
``num_hidden_layers`` 1e18 with a ``sliding_window_pattern`` would build a layer list of
1e18 entries before the entry is validated. `check_config_sizes` looks at every object in
the parsed JSON (the text model's and any nested one's) and names the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gpuwatch.sizing.size_bounds import size_bound_error

CONFIG_KEY_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "num_hidden_layers": "layers",
        "hidden_size": "hidden_size",
        "num_attention_heads": "attention_heads",
        "num_key_value_heads": "kv_heads",
        "head_dim": "head_dim",
        "intermediate_size": "intermediate_size",
        "moe_intermediate_size": "moe_intermediate_size",
        "vocab_size": "vocab_size",
        "num_local_experts": "experts",
        "num_experts": "experts",
        "n_routed_experts": "experts",
        "n_shared_experts": "shared_experts",
        "sliding_window": "sliding_window",
        "kv_lora_rank": "kv_lora_rank",
        "qk_rope_head_dim": "qk_rope_head_dim",
    }
)
"""Transformers' config.json keys -> the `ModelCatalogEntry` field whose bound applies."""


def check_config_sizes(config: object) -> None:
    """Raise ValueError naming the first size key (in any nested object) over its bound.

    `config` is parsed JSON, nested a bounded depth (`bounded_json.read_json`).
    """
    pending = [config]
    while pending:
        value = pending.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                field = CONFIG_KEY_FIELDS.get(key)
                error = None if field is None else size_bound_error(field, item, key=key)
                if error is not None:
                    raise ValueError(error)
                pending.append(item)
        elif isinstance(value, list):
            pending.extend(value)
