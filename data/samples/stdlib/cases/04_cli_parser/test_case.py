import pytest

from fixed import parse


def test_defaults():
    args = parse(["notes.txt"])
    assert args.path == "notes.txt"
    assert args.count == 10
    assert args.verbose is False


def test_count_is_an_integer():
    args = parse(["notes.txt", "--count", "5"])
    assert args.count == 5
    assert isinstance(args.count, int)


def test_short_flags():
    args = parse(["-n", "3", "-v", "notes.txt"])
    assert args.count == 3 and args.verbose is True


def test_rejects_zero():
    with pytest.raises(SystemExit):
        parse(["notes.txt", "-n", "0"])
