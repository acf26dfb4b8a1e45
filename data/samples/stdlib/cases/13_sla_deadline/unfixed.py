"""Support-ticket deadlines: each ticket must be answered within N minutes."""

from datetime import datetime, timedelta


def response_deadline(opened_at: datetime, sla_minutes: int) -> datetime:
    """When the first reply is due."""
    return opened_at + timedelta(sla_minutes)


def time_left(opened_at: datetime, sla_minutes: int, now: datetime) -> timedelta:
    """Time remaining before the deadline, never negative."""
    remaining = response_deadline(opened_at, sla_minutes) - now
    return max(remaining, timedelta(0))


def is_breached(opened_at: datetime, sla_minutes: int, now: datetime) -> bool:
    return now > response_deadline(opened_at, sla_minutes)
