"""The dispatch to config.json readers of layouts whose cache is not a plain KV cache.

`read_state_family` is what `hf_config.model_from_config` calls first: it knows the
model types of hybrid linear attention (Qwen3-Next, Qwen3.5 MoE: `hybrid_attention`),
DeepSeek sparse attention (DeepSeek-V3.2: `sparse_attention`), Mamba hybrids
(Nemotron-H, Nemotron 3: `mamba_hybrid`) and heterogeneous blocks (Nemotron-NAS /
DeciLM: `heterogeneous`), and returns None for every other type. Each family computes
the parameters matrix by matrix and fills `ModelSpec`'s cache fields (`kv_layers`,
`state_layers`, the state values, `indexer_bytes_per_token`); docs/sizing.md, "Caches
that are not a KV cache", says how.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwatch.sizing.heterogeneous import read_nemotron_nas
from gpuwatch.sizing.hybrid_attention import read_qwen3_5_moe, read_qwen3_next
from gpuwatch.sizing.mamba_hybrid import read_nemotron_h
from gpuwatch.sizing.sparse_attention import read_deepseek_v32
from gpuwatch.sizing.state_config import BaseReader, FamilyModel, FamilyReader

READERS: dict[str, FamilyReader] = {
    "qwen3_next": read_qwen3_next,
    "qwen3_5_moe": read_qwen3_5_moe,
    "qwen3_5_moe_text": read_qwen3_next,
    "deepseek_v32": read_deepseek_v32,
    "nemotron_h": read_nemotron_h,
    "nemotron-nas": read_nemotron_nas,
}
"""config.json's ``model_type`` -> its reader."""


def read_state_family(
    config: Mapping[str, object], *, name: str, source: str, base: BaseReader
) -> FamilyModel | None:
    """The model of a config.json of one of these families; None for any other type."""
    model_type = config.get("model_type")
    reader = READERS.get(model_type) if isinstance(model_type, str) else None
    if reader is None:
        return None
    return reader(config, name, source, base)
