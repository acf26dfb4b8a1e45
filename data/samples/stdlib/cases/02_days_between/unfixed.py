"""Small helpers for ISO-style calendar dates (YYYY-MM-DD) typed in by users."""

from datetime import datetime

DATE_FORMAT = "%Y-%d-%m"


def parse_day(text: str) -> datetime:
    """Parse a YYYY-MM-DD string, tolerating surrounding whitespace."""
    return datetime.strptime(text.strip(), DATE_FORMAT)


def days_between(start: str, end: str) -> int:
    """Number of whole days from ``start`` to ``end`` (negative if end is earlier)."""
    return (parse_day(end) - parse_day(start)).days


def is_weekend(text: str) -> bool:
    """True when the date falls on a Saturday or Sunday."""
    return parse_day(text).weekday() >= 5
