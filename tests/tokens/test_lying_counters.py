"""Inference servers whose token counters lie: a jump of 1e300 (or just more than the
source's GPUs could serve), NaN, Inf, a negative count. Over real HTTP, on the
collector's own threads: the span is refused (`gpuwatch.tokens.plausible`), the source
is down with one WARNING per outage, and honest increases count again afterwards, so a
lie never flatters realized $/1M tokens."""

from __future__ import annotations

import logging

import pytest

from gpuwatch.core.clock import ManualClock
from gpuwatch.tokens import TokenCollector, TokenSourceConfig
from gpuwatch.tokens.config import ServerKind
from gpuwatch.tokens.plausible import MAX_TOKENS_PER_SECOND_PER_GPU, ceiling
from tests.tokens.conftest import PageServer, vllm_page

INTERVAL = 15.0


def sglang_page(prompt: float, generation: float) -> str:
    """SGLang's token counters (`TokenizerMetricsCollector`: labelled model_name)."""
    return (
        "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
        "# TYPE sglang:prompt_tokens_total counter\n"
        f'sglang:prompt_tokens_total{{model_name="Qwen/Qwen3-8B"}} {prompt}\n'
        "# HELP sglang:generation_tokens_total Number of generation tokens processed.\n"
        "# TYPE sglang:generation_tokens_total counter\n"
        f'sglang:generation_tokens_total{{model_name="Qwen/Qwen3-8B"}} {generation}\n'
    )


PAGES = {"vllm": vllm_page, "sglang": sglang_page}


class Scraper:
    """A collector of one source on `page_server`, scraped an interval apart."""

    def __init__(self, page_server: PageServer, kind: ServerKind = "vllm", gpus: int = 1) -> None:
        source = TokenSourceConfig(
            name="s", url=page_server.url, kind=kind, gpus=list(range(gpus)), interval_seconds=15
        )
        self.clock = ManualClock()
        self.collector = TokenCollector([source], self.clock)
        self.page_server = page_server

    def step(self, body: str) -> tuple[bool, float, float]:
        """Serve `body`, let one interval pass, scrape: (up, prompt total, generation total)."""
        self.page_server.serve(body)
        self.clock.advance(INTERVAL)
        self.collector.scrape_due()
        (reading,) = self.collector.readings()
        return reading.up, reading.prompt_tokens_total, reading.generation_tokens_total


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
@pytest.mark.parametrize(
    ("prompt", "generation"),
    [
        (1e300, 2000.0),  # the flattering lie: $/1M tokens towards 0
        (1100.0, 1e300),
        (1100.0 + ceiling(INTERVAL, 1) + 1.0, 2050.0),  # just above what one GPU can do
    ],
)
def test_a_counter_jump_no_gpu_could_serve_is_refused(
    page_server: PageServer,
    caplog: pytest.LogCaptureFixture,
    kind: ServerKind,
    prompt: float,
    generation: float,
) -> None:
    page = PAGES[kind]
    scraper = Scraper(page_server, kind)
    with caplog.at_level(logging.DEBUG, logger="gpuwatch"):
        assert scraper.step(page(1000.0, 2000.0)) == (True, 0.0, 0.0)
        (reading,) = scraper.collector.readings()
        first = reading.baseline_seconds  # the cost ledger charges spans within a baseline
        assert first is not None
        assert scraper.step(page(1100.0, 2050.0)) == (True, 100.0, 50.0)
        up, *totals = scraper.step(page(prompt, generation))
        assert not up
        assert totals == [100.0, 50.0], "the lying span is not counted"
        (reading,) = scraper.collector.readings()
        assert reading.error is not None
        assert reading.error.startswith("implausible:")
        assert reading.baseline_seconds == first
        # the next scrape is a new baseline, then honest increases count again
        assert scraper.step(page(1200.0, 2100.0)) == (True, 100.0, 50.0)
        (reading,) = scraper.collector.readings()
        assert reading.baseline_seconds == reading.last_scrape_seconds != first
        assert scraper.step(page(1300.0, 2300.0)) == (True, 200.0, 250.0)
        assert scraper.step(page(1400.0, 2400.0)) == (True, 300.0, 350.0)
    assert not any(r.exc_info for r in caplog.records), "no traceback"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "is down" in warnings[0]
    assert "implausible" in warnings[0]
    families = {f.name: f for f in scraper.collector.families()}
    assert [s.value for s in families["gpuwatch_token_source_up"].samples] == [1.0]


def test_the_ceiling_scales_with_the_gpus_and_the_span(page_server: PageServer) -> None:
    """Eight GPUs may serve eight times what one may: an honest big server is counted."""
    scraper = Scraper(page_server, gpus=8)
    big = 8 * MAX_TOKENS_PER_SECOND_PER_GPU * INTERVAL
    assert scraper.step(vllm_page(0.0, 0.0))[0]
    assert scraper.step(vllm_page(big, 0.0)) == (True, big, 0.0)
    assert not scraper.step(vllm_page(big + big * 1.01, 0.0))[0]


def test_a_flapping_liar_is_one_outage_and_counts_only_honest_spans(
    page_server: PageServer, caplog: pytest.LogCaptureFixture
) -> None:
    scraper = Scraper(page_server)
    with caplog.at_level(logging.DEBUG, logger="gpuwatch"):
        scraper.step(vllm_page(1000.0, 0.0))
        for k in range(4):
            assert not scraper.step(vllm_page(1e300, 0.0))[0]
            scraper.step(vllm_page(1200.0 + 100 * k, 0.0))  # a new baseline
        assert scraper.step(vllm_page(1600.0, 0.0)) == (True, 100.0, 0.0)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "-5"])
def test_a_counter_that_is_not_a_count_is_refused(
    page_server: PageServer, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    scraper = Scraper(page_server)
    with caplog.at_level(logging.DEBUG, logger="gpuwatch"):
        scraper.step(vllm_page(1000.0, 0.0))
        lie = vllm_page(1000.0, 0.0).replace("} 1000.0", "} " + value)
        assert scraper.step(lie) == (False, 0.0, 0.0)
        assert scraper.step(vllm_page(1500.0, 0.0)) == (True, 500.0, 0.0)
    assert not any(r.exc_info for r in caplog.records)
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
