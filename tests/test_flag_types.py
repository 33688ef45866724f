"""Every float flag of `plan`, `report`, `size` and `tco` refuses what means nothing.

`nan`, `inf`, `-inf` and values out of the flag's range (a negative duration, a zero
time limit, a headroom of 1) exit 2 with the flag named and no traceback, through the
real command line (`gpuwatch.cli.main`); and no float flag of those commands is a bare
`type=float` (which takes `nan` and `inf`): each uses `gpuwatch.core.flag_types.number`.
"""

from __future__ import annotations

import argparse
import re

import pytest

from gpuwatch.cli import _parser, main
from gpuwatch.core.flag_types import number

PLAN = ["plan"]
REPORT = ["report"]
SIZE = ["size", "--params", "7B"]
TCO = ["tco", "--gpu", "H100-SXM-80GB", "--utilization", "0.5"]
NOT_FINITE = ("nan", "inf", "-inf", "NaN")

CASES = [
    (PLAN, "--days", ("0", "-1", *NOT_FINITE)),
    (PLAN, "--time-limit", ("0", "-5", *NOT_FINITE)),
    (PLAN, "--headroom", ("1", "-0.1", *NOT_FINITE)),
    (PLAN, "--prometheus-timeout", ("0", "-1", *NOT_FINITE)),
    (PLAN, "--prometheus-scrape-interval", ("0", *NOT_FINITE)),
    (REPORT, "--prometheus-timeout", ("0", "-1", *NOT_FINITE)),
    (REPORT, "--prometheus-scrape-interval", ("0", *NOT_FINITE)),
    (SIZE, "--headroom", ("-0.5", *NOT_FINITE)),
    (SIZE, "--overhead", ("-1", *NOT_FINITE)),
    (SIZE, "--efficiency", ("0", "2", *NOT_FINITE)),
    (SIZE, "--pue", ("0.9", *NOT_FINITE)),
    (SIZE, "--years", ("0", "31", *NOT_FINITE)),
    (SIZE, "--usd-per-kwh", ("-1", *NOT_FINITE)),
    (TCO, "--purchase-usd", ("-1", *NOT_FINITE)),
    (TCO, "--rent-usd-per-hour", ("0", *NOT_FINITE)),
    (TCO, "--power-watts", ("-1", *NOT_FINITE)),
    (TCO, "--tokens-per-second", ("0", *NOT_FINITE)),
    (TCO, "--years", ("0", "31", *NOT_FINITE)),
    (TCO, "--ops-usd-per-year", ("-1", *NOT_FINITE)),
    (TCO, "--hosting-usd-per-kw-month", ("-1", *NOT_FINITE)),
    (TCO, "--usd-per-kwh", ("-1", *NOT_FINITE)),
    (TCO, "--pue", ("0.5", *NOT_FINITE)),
    (TCO, "--cost-of-capital", ("2", *NOT_FINITE)),
    (TCO, "--utilization", ("0", *NOT_FINITE)),
]


def _exit(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage error
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("argv", "value"),
    [([*base, flag], value) for base, flag, values in CASES for value in values],
    ids=lambda part: " ".join(part) if isinstance(part, list) else part,
)
def test_a_meaningless_number_exits_2_naming_the_flag(
    argv: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    flag = argv[-1]
    base = argv[:-1]
    if flag == "--utilization":  # given once: replace the base's value
        base = base[:-2]
    assert _exit([*base, f"{flag}={value}"]) == 2
    err = capsys.readouterr().err
    assert flag in err
    assert "Traceback" not in err
    assert value.lower().lstrip("-") in err.lower()


def _float_flags(parser: argparse.ArgumentParser) -> list[str]:
    return [
        option
        for action in parser._actions
        if action.type is float
        for option in action.option_strings
    ]


def test_no_float_flag_of_these_commands_is_a_bare_float() -> None:
    subparsers = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("plan", "report", "size", "tco"):
        assert _float_flags(subparsers.choices[command]) == [], command


@pytest.mark.parametrize(
    ("bounds", "good", "bad", "words"),
    [
        ({"gt": 0}, ("1e-9", "30", "1e6"), ("0", "-1", "nan", "inf", "x"), "> 0"),
        ({"ge": 0, "lt": 1}, ("0", "0.5"), ("1", "-0.0001", "nan"), "in [0, 1)"),
        ({"gt": 0, "le": 30}, ("30", "0.5"), ("30.01", "0", "inf"), "in (0, 30]"),
        ({"ge": 1}, ("1", "1.5"), ("0.99", "-inf"), ">= 1"),
    ],
)
def test_the_number_type(
    bounds: dict[str, float], good: tuple[str, ...], bad: tuple[str, ...], words: str
) -> None:
    parse = number(**bounds)
    for text in good:
        assert parse(text) == float(text)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"a finite number {words}")):
            parse(text)
