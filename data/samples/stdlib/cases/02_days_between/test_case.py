import pytest

from fixed import days_between, is_weekend, parse_day


def test_days_across_leap_february():
    assert days_between("2024-01-31", "2024-03-01") == 30


def test_negative_span():
    assert days_between("2024-05-10", "2024-05-01") == -9


def test_parse_day_fields():
    day = parse_day(" 2023-12-25 ")
    assert (day.year, day.month, day.day) == (2023, 12, 25)


def test_weekend_detection():
    assert is_weekend("2024-03-16") is True
    assert is_weekend("2024-03-15") is False


def test_rejects_garbage():
    with pytest.raises(ValueError):
        parse_day("15/03/2024")
