"""Run Debian's real `prometheus` for a test: one helper for every module that scrapes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import free_port, require_binary


def scrape_config(targets: Sequence[int], rule_files: Sequence[Path] = ()) -> str:
    """A prometheus.yml scraping loopback `targets` (ports) every second as job
    `gpuwatch`, evaluating `rule_files` every second."""
    rules = "".join(f"  - {path}\n" for path in rule_files)
    listed = ", ".join(f"'127.0.0.1:{port}'" for port in targets)
    return (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        + (f"rule_files:\n{rules}" if rules else "")
        + "scrape_configs:\n  - job_name: gpuwatch\n"
        + f"    static_configs:\n      - targets: [{listed}]\n"
    )


def labelled_scrape_config(targets: Mapping[int, Mapping[str, str]]) -> str:
    """A prometheus.yml scraping loopback ports every second as job `gpuwatch`, each
    port's series carrying its own target labels (e.g. a `cluster_id` per agent)."""
    groups = "".join(
        f"      - targets: ['127.0.0.1:{port}']\n"
        + "        labels: {"
        + ", ".join(f"{name}: '{value}'" for name, value in labels.items())
        + "}\n"
        for port, labels in targets.items()
    )
    return (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        + "scrape_configs:\n  - job_name: gpuwatch\n"
        + f"    static_configs:\n{groups}"
    )


@contextmanager
def running_prometheus(workdir: Path, config: str) -> Iterator[str]:
    """Prometheus with `config` (prometheus.yml text) on a free loopback port, its TSDB and
    log in `workdir`; yields its base URL and stops it on exit."""
    binary = require_binary("prometheus")
    config_file = workdir / "prometheus.yml"
    config_file.write_text(config, encoding="utf-8")
    port = free_port()
    with (workdir / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=10)
