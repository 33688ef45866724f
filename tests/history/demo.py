"""The demo fleet with its simulated vLLM server and the history on, on a manual clock."""

from __future__ import annotations

from pathlib import Path

from gpuwatch.config import AgentConfig, Config, HistoryConfig
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.simulate.services import ScenarioServices
from tests.conftest import scenario_agent, simulated


def history_config(state_dir: Path, **history: object) -> Config:
    return Config(
        agent=AgentConfig(hostname="test-host", state_dir=state_dir),
        history=HistoryConfig(enabled=True, **history),  # type: ignore[arg-type]
    )


class HistoryRun:
    """One agent run on `state_dir`, starting at the manual clock's time."""

    def __init__(
        self,
        state_dir: Path,
        clock: ManualClock,
        config: Config | None = None,
        *,
        kubernetes: bool = False,
        scenario: str = "demo",
    ) -> None:
        """`kubernetes`: attribution on the demo's simulated node (pods, per-pod cost);
        `scenario`: a built-in scenario with the demo's services (`demo-dra`)."""
        nv, self.clock = simulated(scenario, clock)
        self.services = ScenarioServices(nv, self.clock)
        self.services.start()
        self.agent = scenario_agent(
            config or history_config(state_dir),
            nv,
            self.clock,
            token_sources=self.services.token_sources(),
            kubernetes=self.services.kubernetes_config() if kubernetes else None,
        )
        assert self.agent.open_history()

    def run(self, seconds: float, step: float = 10.0) -> FleetSnapshot:
        """Tick every `step` simulated seconds for `seconds`, scraping tokens as due."""
        snapshot = None
        for _ in range(round(seconds / step)):
            self.clock.advance(step)
            self.agent.tokens.scrape_due()
            self.agent.refresh_attribution()
            snapshot = self.agent.tick()
        assert snapshot is not None
        return snapshot

    def close(self) -> None:
        self.agent.stop()
        self.services.stop()
