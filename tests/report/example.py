"""The docs' example report, from a real run: `python -m tests.report.example DIR`.

Runs the real agent on the simulated `demo` fleet (four H100s: a trainer, an idle GPU,
a GPU held by a notebook, a lightly loaded vLLM server that is underutilized) with the
history on, on a manual clock, one tick a minute from 23:00 UTC on 2026-09-30 to 00:30
on 2026-10-03; then runs `gpuwatch report --from 2026-10-01 --to 2026-10-02` on that
history through the CLI (every format, PDF included), and draws the PDF's pages as PNG
with `pdftoppm` (`report-example.png` is page 1, the picture in docs/reports.md).

It prints the live agent's rent-vs-buy host delta at the period's end (what its
`/status` and `gpuwatch_rent_vs_buy_host_monthly_delta_usd` showed then) beside the
report's, so the two can be compared by eye. The simulation has no randomness that
changes between runs: the same command writes the same figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from gpuwatch.config import AgentConfig, Config, HistoryConfig
from gpuwatch.core.clock import ManualClock
from tests.history.demo import HistoryRun

START = datetime(2026, 9, 30, 23, 0, tzinfo=UTC)
PERIOD_END = datetime(2026, 10, 3, tzinfo=UTC)
TAIL_SECONDS = 1800.0
TICK_SECONDS = 60.0
HOSTNAME = "demo-host"
PAGES = 3  # pages of the PDF drawn as PNG (page 1 is the docs' picture)


def run_agent(state_dir: Path) -> float | None:
    """Run the demo agent with history into `state_dir`; the live host delta at the end
    of the period ($/month, what /status and /metrics showed)."""
    config = Config(
        agent=AgentConfig(
            hostname=HOSTNAME,
            state_dir=state_dir,
            interval_seconds=TICK_SECONDS,
            slow_interval_seconds=TICK_SECONDS,
        ),
        history=HistoryConfig(enabled=True),
    )
    run = HistoryRun(state_dir, ManualClock(START.timestamp()), config)
    live = None
    end = PERIOD_END.timestamp()
    try:
        assert run.agent.history is not None
        ticks = round((end + TAIL_SECONDS - START.timestamp()) / TICK_SECONDS)
        for i in range(ticks):
            run.clock.advance(TICK_SECONDS)
            run.agent.tokens.scrape_due()
            snapshot = run.agent.tick()
            if snapshot.timestamp_seconds == end:
                live = snapshot.cost.rent_vs_buy_host_monthly_delta_usd
            if i % 60 == 0:
                run.agent.history.flush()
    finally:
        run.close()
    return live


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    state_dir = out / "state"
    live = run_agent(state_dir)
    config = out / "gpuwatch.toml"
    config.write_text(
        f"[agent]\nstate_dir = {json.dumps(str(state_dir))}\nhostname = {json.dumps(HOSTNAME)}\n"
        "\n[history]\nenabled = true\n"
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwatch",
            "report",
            "--config",
            str(config),
            "--from",
            "2026-10-01",
            "--to",
            "2026-10-02",
            "--format",
            "html,md,csv,json,pdf",
            "--out",
            str(out),
        ],
        check=True,
    )
    (document,) = out.glob("*.json")
    report = json.loads(document.read_text())
    (pdf,) = out.glob("*.pdf")
    for page in range(1, PAGES + 1):
        name = "report-example" if page == 1 else f"report-example-{page}"
        subprocess.run(
            ["pdftoppm", "-png", "-r", "80", "-f", str(page), "-l", str(page), "-singlefile",
             str(pdf), str(out / name)],
            check=True,
        )  # fmt: skip
    print(f"live agent's rent vs buy at {PERIOD_END:%Y-%m-%d %H:%M} UTC: {live}")
    print(f"report's rent vs buy (busy fraction): {report['rent_vs_buy_monthly_delta_usd']}")
    print(
        f"report's rent vs buy (mean activity): {report['rent_vs_buy_activity_monthly_delta_usd']}"
    )
    print("\n".join(str(p) for p in sorted(out.iterdir()) if p.is_file()))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
