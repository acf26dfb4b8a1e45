from datetime import datetime, timedelta

from fixed import is_breached, response_deadline, time_left

OPENED = datetime(2024, 1, 1, 9, 0)


def test_deadline_is_minutes_later():
    assert response_deadline(OPENED, 90) == datetime(2024, 1, 1, 10, 30)


def test_time_left():
    assert time_left(OPENED, 60, datetime(2024, 1, 1, 9, 45)) == timedelta(minutes=15)
    assert time_left(OPENED, 60, datetime(2024, 1, 1, 11, 0)) == timedelta(0)


def test_breach():
    assert is_breached(OPENED, 30, datetime(2024, 1, 1, 9, 31))
    assert not is_breached(OPENED, 30, datetime(2024, 1, 1, 9, 30))
