"""`gpuwatch plan`: what the fleet's GPUs should be, from what the workloads really used.

    gpuwatch plan [--source local | --prometheus URL ...] [--days N] [--config F]
                  [--format text,md,html,json] [--out DIR] [--headroom R]
                  [--candidates ID,ID] [--no-mig] [--no-time-slicing]
                  [--share-across-namespaces] [--time-limit S] [--slack]

Reads each GPU's use over the last `--days` (default 30) from this host's history or a
Prometheus-compatible API (the report's `--prometheus*` flags), turns it into units
(`plan/usage.py`), solves for the cheapest set of GPUs that holds them (`plan/solve/`,
HiGHS: the `plan` extra) and writes the plan: text on stdout without `--out`, else the
formats asked for (`gpuwatch-plan.<fmt>`) and the files that apply it (`apply/`:
`gpuwatch.plan.apply`). Exit codes: 0 written, 1 the source, the
solver or Slack failed, or the lookback holds no GPU data (one line, no plan), 2 bad
usage or config (every number flag finite and in range: `gpuwatch.core.flag_types`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import IO, Any

from gpuwatch.cli import summary
from gpuwatch.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from gpuwatch.cli.history_flags import add_output_arguments, add_source_arguments
from gpuwatch.config import Config, load_config
from gpuwatch.core.flag_types import POSITIVE, number
from gpuwatch.core.paths import write_atomic
from gpuwatch.history.store import last_sample_epoch
from gpuwatch.plan.apply.files import write_apply
from gpuwatch.plan.make import PlanSourceError, make_plan
from gpuwatch.plan.model import PlanOptions
from gpuwatch.plan.render import (
    PlanReport,
    render_html,
    render_json,
    render_markdown,
    render_text,
    slack_lines,
)
from gpuwatch.promapi.flags import PrometheusFlagError, prometheus_options
from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.slack.mrkdwn import TEXT_MAX_CHARS, clip_text

FORMATS = ("text", "md", "html", "json")
_SUFFIX = {"text": "txt", "md": "md", "html": "html", "json": "json"}
_RENDER: Mapping[str, Callable[[PlanReport], str]] = {
    "text": render_text,
    "md": render_markdown,
    "html": render_html,
    "json": render_json,
}


class PlanUsageError(Exception):
    """A mistake on the command line: one line, exit 2."""


def run(args: argparse.Namespace) -> int:
    """Run `gpuwatch plan` with the `--config` file."""
    return run_plan(args, load_config(args.config))


def add_arguments(plan: argparse.ArgumentParser) -> None:
    """`gpuwatch plan`'s flags."""
    add_source_arguments(plan, rules=False)
    plan.add_argument(
        "--days", type=POSITIVE, default=30.0, help="the lookback in days (default 30)"
    )
    plan.add_argument(
        "--until",
        metavar="TIME",
        help="the lookback's end, UTC: YYYY-MM-DD (midnight) or YYYY-MM-DDTHH:MM "
        "(default: now, or the history's last sample when later)",
    )
    add_output_arguments(
        plan,
        formats_help="comma-separated: text,md,html,json (default: text on stdout without "
        "--out, md,html,json with it)",
    )
    plan.add_argument(
        "--headroom",
        type=number(ge=0, lt=1),
        metavar="RATIO",
        help="spare memory, compute and bandwidth per placement (default: [analysis] "
        "headroom_ratio)",
    )
    plan.add_argument(
        "--candidates",
        metavar="IDS",
        help="catalog GPU ids the plan may use, comma-separated (default: [analysis] "
        "candidate_gpus, else each GPU's own class)",
    )
    plan.add_argument("--no-mig", action="store_true", help="no MIG profiles")
    plan.add_argument("--no-time-slicing", action="store_true", help="no time-sliced GPUs")
    plan.add_argument(
        "--share-across-namespaces",
        action="store_true",
        help="let units of different namespaces share a GPU (default: never)",
    )
    plan.add_argument(
        "--time-limit",
        type=POSITIVE,
        default=None,
        metavar="SECONDS",
        help="a wall-clock cap on the solver (default: none; with one the plan depends on "
        "the machine's load)",
    )
    plan.add_argument(
        "--work-limit",
        type=_positive_int,
        default=PlanOptions().work_limit_nodes,
        metavar="NODES",
        help="branch-and-bound nodes per model (default: %(default)s): the deterministic limit",
    )
    plan.add_argument(
        "--seed", type=int, default=0, help="the solver's random seed (default: %(default)s)"
    )
    plan.add_argument("--slack", action="store_true", help="send a summary through Slack")


def _positive_int(text: str) -> int:
    """An argparse `type`: a whole number >= 1 (argparse names the flag, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def plan_options(args: argparse.Namespace, config: Config) -> PlanOptions:
    """The `PlanOptions` of the flags and the config, checked."""
    headroom = config.analysis.headroom_ratio if args.headroom is None else args.headroom
    if not 0 <= headroom < 1:
        raise PlanUsageError(f"--headroom {headroom:g}: expected a ratio in [0, 1)")
    candidates: tuple[str, ...] | None = None
    if args.candidates is not None:
        candidates = tuple(part.strip() for part in args.candidates.split(",") if part.strip())
        if not candidates:
            raise PlanUsageError("--candidates: expected catalog GPU ids, comma-separated")
    elif config.analysis.candidate_gpus is not None:
        candidates = tuple(config.analysis.candidate_gpus)
    return PlanOptions(
        headroom_ratio=headroom,
        candidate_gpu_ids=candidates,
        mig=not args.no_mig,
        time_slicing=not args.no_time_slicing,
        share_across_namespaces=args.share_across_namespaces,
        time_limit_seconds=args.time_limit,
        **policy_options(config),
        work_limit_nodes=args.work_limit,
        seed=args.seed,
    )


def policy_options(config: Config) -> dict[str, Any]:
    """`PlanOptions` fields of the `[plan]` policy section."""
    policy = config.plan
    return {
        "no_time_slicing_namespaces": frozenset(policy.no_time_slicing_namespaces),
        "quotas": tuple((q.namespace, q.resource, q.limit) for q in policy.quotas),
        "min_saving_usd_per_month": policy.min_saving_usd_per_month,
        "context_switch_ratio": policy.context_switch_ratio,
    }


def parse_formats(text: str | None, has_out: bool) -> tuple[str, ...]:
    """The formats asked for, checked against `--out`."""
    if text is None:
        return ("md", "html", "json") if has_out else ("text",)
    formats = tuple(dict.fromkeys(p.strip().lower() for p in text.split(",") if p.strip()))
    unknown = [name for name in formats if name not in FORMATS]
    if unknown or not formats:
        raise PlanUsageError(f"--format {text!r}: choose among {', '.join(FORMATS)}")
    if len(formats) > 1 and not has_out:
        raise PlanUsageError("without --out only one format can be written (to stdout)")
    return formats


def parse_until(text: str | None) -> float | None:
    """`--until` as epoch seconds (UTC), None when not given."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise PlanUsageError(
            f"--until {text!r}: expected YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def run_plan(
    args: argparse.Namespace,
    config: Config,
    *,
    now: datetime | None = None,
    environ: Mapping[str, str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run `gpuwatch plan` with the loaded config; returns the exit code."""
    out_stream = stdout or sys.stdout
    err = stderr or sys.stderr
    env = os.environ if environ is None else environ
    moment = now or datetime.now(UTC)
    try:
        prometheus = prometheus_options(args)
        options = plan_options(args, config)
        formats = parse_formats(args.formats, args.out is not None)
    except (PlanUsageError, PrometheusFlagError) as exc:
        print(f"gpuwatch: {exc}", file=err)
        return EXIT_USAGE
    webhook = None
    if args.slack:
        webhook = summary.webhook(config, env, err)
        if webhook is None:
            return EXIT_USAGE
    try:
        until = parse_until(args.until)
    except PlanUsageError as exc:
        print(f"gpuwatch: {exc}", file=err)
        return EXIT_USAGE
    end = moment.timestamp() if until is None else until
    if until is None and prometheus is None and now is None:
        end = max(end, _last_local_sample(config) or end)
    try:
        report = make_plan(
            config,
            options,
            days=args.days,
            end_epoch=end,
            prometheus=prometheus,
            generated=moment.strftime("%Y-%m-%d %H:%M UTC"),
        )
    except PlanSourceError as exc:
        print(f"gpuwatch: {exc}", file=err)
        return EXIT_FAILURE
    if args.out is None:
        out_stream.write(_RENDER[formats[0]](report))
    else:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            for fmt in formats:
                path = args.out / f"gpuwatch-plan.{_SUFFIX[fmt]}"
                write_atomic(path, _RENDER[fmt](report).encode("utf-8"))
                print(f"gpuwatch: wrote {path}", file=err)
            for path in write_apply(report, build_gpu_catalog(config.sizing.gpus), args.out):
                print(f"gpuwatch: wrote {path}", file=err)
        except OSError as exc:
            print(f"gpuwatch: cannot write the plan to {args.out}: {exc.strerror}", file=err)
            return EXIT_FAILURE
    if webhook is None:
        return EXIT_OK
    return summary.send(slack_payload(report), config, webhook, err)


def _last_local_sample(config: Config) -> float | None:
    """The history's newest sample (a simulated run may be ahead of the wall clock)."""
    try:
        value = last_sample_epoch(config.agent.state_dir)
    except Exception:  # noqa: BLE001 -- the load itself reports the history's failure
        return None
    return None if value is None else float(value) + 1.0


def slack_payload(report: PlanReport) -> dict[str, Any]:
    """The plan's Slack summary: a section per chunk of lines, within Slack's limits."""
    lines = slack_lines(report)
    text = clip_text("\n".join(lines), TEXT_MAX_CHARS)
    return {
        "text": clip_text(lines[0]),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }
