"""The report's period: a UTC month (the month in progress is month to date), or whole
days `--from`/`--to` (the last day included), parsed from the command line; the month
before one (the comparison) and the UTC text of a moment."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from gpuwatch.report.model import Period


class ReportUsageError(Exception):
    """A mistake on the command line: one line, exit 2."""


def month_period(year: int, month: int, now: datetime) -> Period:
    """The UTC month; the month in progress ends at `now` (month to date)."""
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    label = f"{year:04d}-{month:02d}"
    if start >= now:
        raise ReportUsageError(f"--month {label} has not started yet")
    if end > now:
        return Period(start, now, label, month_to_date=True)
    return Period(start, end, label)


def previous_month(moment: datetime) -> tuple[int, int]:
    """(year, month) of the UTC month before the one holding `moment`."""
    moment = moment.astimezone(UTC)
    return (moment.year, moment.month - 1) if moment.month > 1 else (moment.year - 1, 12)


def month_before(period: Period) -> Period:
    """What month over month compares `period` with, like with like: the whole UTC
    month before for a whole month; for a month to date, the same span from the start
    of the month before (the 1st 00:00 to the 6th 14:00 against the same days of the
    previous month, capped at its end), labelled so every format says which."""
    year, month = previous_month(period.start)
    whole = month_period(year, month, period.start)
    if not period.month_to_date:
        return whole
    end = min(whole.start + (period.end - period.start), whole.end)
    label = f"{utc_text(whole.start)} to {utc_text(end)} (the same span of {whole.label})"
    return Period(whole.start, end, label)


def utc_text(moment: datetime) -> str:
    """`2026-10-06 14:00 UTC`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _parse_day(text: str, option: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ReportUsageError(f"{option} {text!r}: expected a date as YYYY-MM-DD") from None


def parse_period(
    month: str | None, from_date: str | None, to_date: str | None, now: datetime
) -> Period:
    """The period the options name (UTC), checked."""
    if to_date is not None and from_date is None:
        raise ReportUsageError("--to needs --from")
    if month is not None:
        try:
            parsed = datetime.strptime(month, "%Y-%m")
        except ValueError:
            raise ReportUsageError(f"--month {month!r}: expected YYYY-MM, e.g. 2026-10") from None
        return month_period(parsed.year, parsed.month, now)
    if from_date is not None:
        if to_date is None:
            raise ReportUsageError("--from needs --to (the last day, included)")
        first, last = _parse_day(from_date, "--from"), _parse_day(to_date, "--to")
        if last < first:
            raise ReportUsageError("--to is before --from")
        start = datetime.combine(first, datetime.min.time(), UTC)
        if start >= now:
            raise ReportUsageError(f"--from {from_date} has not started yet")
        end = min(datetime.combine(last + timedelta(days=1), datetime.min.time(), UTC), now)
        return Period(start, end, f"{first.isoformat()} to {last.isoformat()}")
    return month_period(now.year, now.month, now)
