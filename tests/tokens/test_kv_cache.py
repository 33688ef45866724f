"""What inference servers say about their KV cache (gpuwatch.tokens.kv), from literal pages
shaped as vLLM and SGLang write them, through the parser and a real HTTP scrape."""

from __future__ import annotations

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.simulate import SimulatedNvml, load_scenario
from gpuwatch.simulate.services import ScenarioServices, kv_cache_blocks
from gpuwatch.simulate.vllm_server import kv_cache_tokens_in_use, vllm_num_gpu_blocks
from gpuwatch.tokens import TokenCollector, TokenSourceConfig
from gpuwatch.tokens.config import COUNTER_NAMES
from gpuwatch.tokens.kv import KV_CACHE_NAMES, KvCacheReading, kv_cache_reading
from gpuwatch.tokens.parse import ExpositionError, find_samples
from tests.tokens.conftest import PageServer, vllm_page

# vLLM v1 (vllm/v1/metrics/loggers.py): CacheConfig.metrics_info() as labels of a gauge of
# 1, the usage gauge labelled model_name and engine
VLLM_CACHE = """\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",\
enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_cpu_blocks="None",\
num_gpu_blocks="27277",prefix_caching_hash_algo="builtin",swap_space="4"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.25
"""

# before v1 (vllm/engine/metrics.py): the usage gauge was gpu_cache_usage_perc
VLLM_OLD = """\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="fp8",gpu_memory_utilization="0.9",\
num_cpu_blocks="2048",num_gpu_blocks="1000"} 1.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="Qwen/Qwen2.5-7B-Instruct"} 0.5
"""

# two data-parallel engines, each with its own pool
VLLM_TWO_ENGINES = """\
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="100"} 1.0
vllm:cache_config_info{block_size="32",cache_dtype="auto",engine="1",num_gpu_blocks="50"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 1.0
"""

# SGLang (python/sglang/srt/metrics/collector.py, SchedulerMetricsCollector), two
# tensor-parallel ranks reporting the same pool
SGLANG = """\
# HELP sglang:num_used_tokens The number of used tokens.
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{model_name="Qwen/Qwen3-8B",tp_rank="0"} 12000.0
sglang:num_used_tokens{model_name="Qwen/Qwen3-8B",tp_rank="1"} 12000.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="Qwen/Qwen3-8B",tp_rank="0"} 0.03
sglang:token_usage{model_name="Qwen/Qwen3-8B",tp_rank="1"} 0.03
# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{model_name="Qwen/Qwen3-8B",tp_rank="0"} 400000.0
sglang:max_total_num_tokens{model_name="Qwen/Qwen3-8B",tp_rank="1"} 400000.0
"""

SGLANG_USAGE_ONLY = """\
sglang:token_usage{model_name="m"} 0.25
sglang:max_total_num_tokens{model_name="m"} 80000.0
"""


def read(kind: str, body: str, matchers: dict[str, str] | None = None) -> KvCacheReading | None:
    found = find_samples(body.encode(), KV_CACHE_NAMES.get(kind, ()))
    return kv_cache_reading(kind, found, matchers or {})


def test_vllm_v1_tokens_in_use_are_usage_times_blocks_times_block_size() -> None:
    reading = read("vllm", VLLM_CACHE)
    assert reading == KvCacheReading(
        used_tokens=0.25 * 27277 * 16,
        capacity_tokens=27277 * 16,
        model_names=("meta-llama/Llama-3.1-8B-Instruct",),
        cache_dtype="auto",
    )
    assert reading.usage_ratio == 0.25


def test_vllm_before_v1_reads_gpu_cache_usage_perc() -> None:
    reading = read("vllm", VLLM_OLD)
    assert reading is not None
    assert (reading.used_tokens, reading.capacity_tokens) == (8000.0, 16000.0)
    assert reading.cache_dtype == "fp8"
    assert reading.model_names == ("Qwen/Qwen2.5-7B-Instruct",)


def test_vllm_engines_are_pools_of_their_own() -> None:
    reading = read("vllm", VLLM_TWO_ENGINES)
    assert reading is not None
    assert reading.capacity_tokens == 100 * 16 + 50 * 32
    assert reading.used_tokens == 0.5 * 1600 + 1.0 * 1600


def test_vllm_before_profiling_has_no_capacity() -> None:
    body = VLLM_CACHE.replace('num_gpu_blocks="27277"', 'num_gpu_blocks="None"')
    reading = read("vllm", body)
    assert reading is not None
    assert (reading.used_tokens, reading.capacity_tokens) == (None, None)
    assert reading.usage_ratio is None


def test_vllm_label_matchers_select_the_usage_series() -> None:
    body = VLLM_TWO_ENGINES
    reading = read("vllm", body.replace('engine="1",model_name="m"', 'engine="1",model_name="x"'))
    assert reading is not None
    assert reading.model_names == ("m", "x"), "two models: the need cannot be measured"
    only = read("vllm", body, {"engine": "0"})
    assert only is not None
    assert (only.used_tokens, only.capacity_tokens) == (800.0, 1600.0)


def test_a_page_without_the_families_says_nothing() -> None:
    assert read("vllm", vllm_page(1.0, 2.0)) is None
    assert read("sglang", "sglang:prompt_tokens_total 3\n") is None
    assert read("tgi", VLLM_CACHE) is None, "TGI publishes no KV cache use"
    assert read("llamacpp", "llamacpp:kv_cache_usage_ratio 0.5\n") is None
    assert KV_CACHE_NAMES.keys() == {"vllm", "sglang"}


def test_sglang_tensor_parallel_ranks_are_one_pool() -> None:
    reading = read("sglang", SGLANG)
    assert reading == KvCacheReading(12000.0, 400000.0, ("Qwen/Qwen3-8B",), None)


def test_sglang_without_num_used_tokens_reads_the_usage() -> None:
    reading = read("sglang", SGLANG_USAGE_ONLY)
    assert reading is not None
    assert (reading.used_tokens, reading.capacity_tokens) == (20000.0, 80000.0)


def test_a_negative_usage_is_refused() -> None:
    with pytest.raises(ExpositionError):
        read("vllm", VLLM_CACHE.replace("} 0.25", "} -0.25"))


def test_the_collector_reads_the_kv_cache_with_the_counters(page_server: PageServer) -> None:
    counters = vllm_page(10.0, 20.0, models=("meta-llama/Llama-3.1-8B-Instruct",))
    page_server.serve(counters + VLLM_CACHE)
    collector = TokenCollector(
        [TokenSourceConfig(name="v", url=page_server.url, gpus=[0])], ManualClock()
    )
    reading = collector.scrape("v")
    assert reading.up
    assert reading.kv_cache is not None
    assert reading.kv_cache.used_tokens == 0.25 * 27277 * 16
    families = {f.name: f for f in collector.families()}
    used = families["gpuwatch_token_source_kv_cache_used_tokens"].samples
    capacity = families["gpuwatch_token_source_kv_cache_capacity_tokens"].samples
    assert [(s.labels, s.value) for s in used] == [({"source": "v"}, 0.25 * 27277 * 16)]
    assert [s.value for s in capacity] == [27277 * 16]
    page_server.serve("garbage", status=500)
    down = collector.scrape("v")
    assert not down.up
    assert "gpuwatch_token_source_kv_cache_used_tokens" not in {
        f.name for f in collector.families()
    }, "a down server's KV cache is not shown as current"


def test_a_broken_kv_family_is_a_failed_scrape(
    page_server: PageServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A page whose KV cache families are malformed is not a usable exposition: the
    source is down (its totals kept), with one WARNING for the outage."""
    duplicated = VLLM_CACHE + VLLM_CACHE.splitlines()[-1] + "\n"  # a repeated usage series
    collector = TokenCollector([TokenSourceConfig(name="v", url=page_server.url)], ManualClock())
    page_server.serve(vllm_page(10.0, 20.0) + VLLM_CACHE)
    assert collector.scrape("v").up
    page_server.serve(vllm_page(15.0, 25.0) + duplicated)
    for _ in range(3):
        reading = collector.scrape("v")
        assert not reading.up
        assert reading.error is not None
        assert "appears twice" in reading.error
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings


def test_only_vllm_and_sglang_sources_take_a_model() -> None:
    TokenSourceConfig(name="s", url="http://127.0.0.1:1/metrics", kind="sglang", model="qwen3-8b")
    with pytest.raises(ValueError, match="kind vllm or sglang"):
        TokenSourceConfig(name="t", url="http://127.0.0.1:1/metrics", kind="tgi", model="x")
    with pytest.raises(ValueError, match="at most one of model and config_json"):
        TokenSourceConfig(
            name="v", url="http://127.0.0.1:1/metrics", model="x", config_json="/c.json"
        )
    assert COUNTER_NAMES.keys() > KV_CACHE_NAMES.keys()


# --- the simulated vLLM server -------------------------------------------------------


def test_the_simulated_pool_is_sized_as_vllm_sizes_it() -> None:
    """docs/simulation.md: the demo's H100 and Llama-3.1-8B in bf16."""
    total = (81559 - 454) * 2**20
    assert total == 85_044_756_480
    blocks = vllm_num_gpu_blocks(total, 16_060_522_496, 131_072)
    assert blocks == (76_540_280_832 - 16_060_522_496 - 1_921_997_783 - 1_352_914_698) // (
        16 * 131_072
    )
    assert blocks == 27_277
    assert vllm_num_gpu_blocks(10 * 2**30, 16_060_522_496, 131_072) == 0, "nothing left"
    nv = SimulatedNvml(load_scenario("demo"), clock=ManualClock())
    assert kv_cache_blocks(nv, nv.scenario.token_servers[0]) == 27_277


def test_the_simulated_usage_follows_the_load() -> None:
    assert kv_cache_tokens_in_use(0.0, 0.0) == 0.0
    assert kv_cache_tokens_in_use(7000.0, 1400.0) == pytest.approx(48_125.0)
    assert kv_cache_tokens_in_use(7000.0, 1400.0) == 6.25 * 7000 + 3.125 * 1400
    assert kv_cache_tokens_in_use(2000.0, 400.0) < kv_cache_tokens_in_use(7000.0, 1400.0)


def test_the_demo_server_publishes_its_pool_and_usage() -> None:
    clock = ManualClock()
    nv = SimulatedNvml(load_scenario("demo"), clock=clock)
    services = ScenarioServices(nv, clock, cluster=False)
    services.start()
    try:
        clock.advance(600.0)
        (source,) = services.token_sources()
        collector = TokenCollector([source], clock, fetch=services.fetch)
        reading = collector.scrape(source.name)
        page = services.fetch(source.url, 1.0)
    finally:
        services.stop()
    assert b'num_gpu_blocks="27277"' in page
    assert b'cache_dtype="auto"' in page
    kv = reading.kv_cache
    assert kv is not None
    assert kv.capacity_tokens == 27_277 * 16
    assert kv.model_names == ("meta-llama/Llama-3.1-8B-Instruct",)
    assert kv.used_tokens is not None
    assert 0.02 < kv.used_tokens / kv.capacity_tokens < 0.12, "SM activity 0.1-0.35"
