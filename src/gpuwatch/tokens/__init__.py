"""Token counters scraped from inference servers, for the realized cost per token.

    collector = TokenCollector(config.token_sources, clock)
    collector.scrape_due()          # from a scheduler job, every second or so
    collector.readings()            # cumulative, reset-corrected totals per source
    collector.families()            # gpuwatch_tokens_total{source,kind} and friends

Modules: `config` (the `[[token_sources]]` entries), `parse` (pure, finds the wanted
counters in a /metrics body), `counters` (pure, reset correction), `fetch` (the HTTP
transport of one source: a GET bounded in time and size) and `collector` (scraping on a
schedule, failure handling, metric families). See docs/tokens.md.

What must not live here: cost per token (`gpuwatch.cost`), the sizing model, an import
of `gpuwatch.config`. Layer: a source (beside nvml, kube, billing), above core.
"""

from gpuwatch.tokens.collector import TokenCollector, TokenReading
from gpuwatch.tokens.config import COUNTER_NAMES, TokenSourceConfig, TokenSources
from gpuwatch.tokens.fetch import UrllibFetch

__all__ = [
    "COUNTER_NAMES",
    "TokenCollector",
    "TokenReading",
    "TokenSourceConfig",
    "TokenSources",
    "UrllibFetch",
]
