"""Inference servers that lie about their KV cache: a pool of 1e15 or 1e308 blocks, a
used-token count of 1e300, a pool of 0, a gauge that flaps. What they claim is bounded
(`gpuwatch.tokens.kv.MAX_POOL_TOKENS`): an absurd pool is a failed scrape with one log
line and `gpuwatch_token_source_up 0`, never a number passed on or a traceback."""

from __future__ import annotations

import logging
import threading

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.tokens import TokenCollector, TokenSourceConfig
from gpuwatch.tokens.kv import MAX_POOL_TOKENS, KvCacheReading
from gpuwatch.tokens.parse import ExpositionError
from tests.tokens.conftest import PageServer, vllm_page
from tests.tokens.test_kv_cache import SGLANG, VLLM_CACHE, VLLM_TWO_ENGINES, read

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def blocks(value: str) -> str:
    """VLLM_CACHE with `num_gpu_blocks` said to be `value`."""
    return VLLM_CACHE.replace('num_gpu_blocks="27277"', f'num_gpu_blocks="{value}"')


@pytest.mark.parametrize(
    "value", ["1e15", "1e308", "1e400", "inf", "nan", "-16", "27277.5", str(2**36 + 1)]
)
def test_an_absurd_vllm_pool_is_a_parse_error(value: str) -> None:
    """1e15 blocks of 16 tokens would be a need of 1e21 bytes; 1e308 overflowed a float
    (OverflowError, past the collector's handler); 2^36 + 1 blocks of 16 is just above
    the bound."""
    with pytest.raises(ExpositionError, match="num_gpu_blocks"):
        read("vllm", blocks(value))


def test_the_largest_pool_allowed_is_read() -> None:
    reading = read("vllm", blocks(str(2**36)).replace("} 0.25", "} 1.0"))
    assert reading is not None
    assert reading.capacity_tokens == reading.used_tokens == MAX_POOL_TOKENS == 2**36 * 16


def test_an_absurd_block_size_is_a_parse_error() -> None:
    with pytest.raises(ExpositionError, match="block_size"):
        read("vllm", VLLM_CACHE.replace('block_size="16"', 'block_size="1e300"'))


def test_a_pool_of_zero_blocks_is_no_pool() -> None:
    """vLLM does not serve without a KV cache: 0 blocks is no evidence of a need, not a
    need of the weights alone."""
    reading = read("vllm", blocks("0"))
    assert reading is not None
    assert (reading.used_tokens, reading.capacity_tokens) == (None, None)


@pytest.mark.parametrize(
    ("family", "value"),
    [("num_used_tokens", "1e300"), ("max_total_num_tokens", "1e300"), ("num_used_tokens", "1e13")],
)
def test_an_absurd_sglang_token_count_is_a_parse_error(family: str, value: str) -> None:
    lines = [
        line.rsplit(" ", 1)[0] + f" {value}" if line.startswith(f"sglang:{family}{{") else line
        for line in SGLANG.splitlines()
    ]
    with pytest.raises(ExpositionError, match=f"sglang:{family}"):
        read("sglang", "\n".join(lines) + "\n")


def test_an_sglang_pool_of_zero_is_no_pool_and_use_stays_within_the_pool() -> None:
    empty = SGLANG.replace("} 400000.0", "} 0.0")
    reading = read("sglang", empty)
    assert reading is not None
    assert (reading.used_tokens, reading.capacity_tokens) == (None, None)
    over = read("sglang", SGLANG.replace("} 12000.0", "} 900000.0"))
    assert over is not None
    assert over.used_tokens == over.capacity_tokens == 400_000.0


def test_engines_are_counted() -> None:
    """Two vLLM engines (data parallel) are two pools, two copies of the weights; SGLang's
    tensor-parallel ranks are one."""
    two = read("vllm", VLLM_TWO_ENGINES)
    assert two is not None
    assert two.engines == 2
    one = read("vllm", VLLM_TWO_ENGINES, {"engine": "0"})
    assert one is not None
    assert one.engines == 1
    sglang = read("sglang", SGLANG)
    assert sglang == KvCacheReading(12000.0, 400000.0, ("Qwen/Qwen3-8B",), None, engines=1)


def sglang_ranks(tp: int, pp: int, dp: int) -> str:
    """An SGLang page with the labels its scheduler sets (`SchedulerMetricsMixin.
    init_metrics`: model_name, engine_type, tp_rank, pp_rank, dp_rank), each rank
    reporting the same pool of 400,000 tokens with 12,000 in use."""
    lines = []
    for name, value in (
        ("num_used_tokens", "12000.0"),
        ("token_usage", "0.03"),
        ("max_total_num_tokens", "400000.0"),
    ):
        for d in range(dp):
            for p in range(pp):
                for t in range(tp):
                    labels = (
                        f'model_name="Qwen/Qwen3-8B",engine_type="unified",'
                        f'tp_rank="{t}",pp_rank="{p}",dp_rank="{d}"'
                    )
                    lines.append(f"sglang:{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("tp", "pp", "dp"), [(2, 2, 1), (1, 4, 1), (2, 2, 2)])
def test_sglang_pipeline_stages_are_one_pool(tp: int, pp: int, dp: int) -> None:
    """Pipeline-parallel stages (`pp_rank`) hold one copy of the weights between them,
    as tensor-parallel ranks do: counting each stage as an engine multiplied the
    weights and the tokens in use by `pp`. Data-parallel ranks (`dp_rank`) add up."""
    reading = read("sglang", sglang_ranks(tp, pp, dp))
    assert reading == KvCacheReading(
        12000.0 * dp, 400000.0 * dp, ("Qwen/Qwen3-8B",), None, engines=dp
    )


@pytest.mark.parametrize("value", ["1e15", "1e308"])
def test_a_lying_server_is_down_with_one_line_and_no_traceback(
    page_server: PageServer, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    """Over real HTTP, scraped on the collector's own threads: the source is down while
    it lies (one WARNING naming the field, no traceback, no exception in a thread), its
    totals kept, its KV cache not exported; it is up when it stops."""
    source = TokenSourceConfig(name="v", url=page_server.url, gpus=[0])
    clock = ManualClock()
    collector = TokenCollector([source], clock)
    crashed: list[threading.ExceptHookArgs] = []
    previous = threading.excepthook
    threading.excepthook = crashed.append
    try:
        with caplog.at_level(logging.DEBUG, logger="gpuwatch"):
            page_server.serve(vllm_page(10.0, 20.0, models=(LLAMA,)) + VLLM_CACHE)
            collector.scrape_due()
            page_server.serve(vllm_page(15.0, 30.0, models=(LLAMA,)) + blocks(value))
            for _ in range(4):
                clock.advance(15.0)
                collector.scrape_due()
                (reading,) = collector.readings()
                assert not reading.up
                assert reading.error is not None
                assert "num_gpu_blocks" in reading.error
                assert (reading.prompt_tokens_total, reading.generation_tokens_total) == (0, 0)
    finally:
        threading.excepthook = previous
    assert crashed == []
    assert not any(r.exc_info for r in caplog.records), "no traceback"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "is down" in warnings[0]
    assert "num_gpu_blocks" in warnings[0]
    families = {f.name: f for f in collector.families()}
    assert [s.value for s in families["gpuwatch_token_source_up"].samples] == [0.0]
    assert "gpuwatch_token_source_kv_cache_capacity_tokens" not in families
    page_server.serve(vllm_page(20.0, 40.0, models=(LLAMA,)) + VLLM_CACHE)
    back = collector.scrape("v")
    assert back.up
    assert (back.prompt_tokens_total, back.generation_tokens_total) == (10.0, 20.0)
    assert back.kv_cache is not None
    assert back.kv_cache.capacity_tokens == 27277 * 16
