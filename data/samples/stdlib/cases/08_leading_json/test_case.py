import json

import pytest

from fixed import iter_documents, split_leading_json


def test_returns_value_and_remainder():
    assert split_leading_json('{"a": 1} trailing') == ({"a": 1}, " trailing")


def test_concatenated_documents():
    assert list(iter_documents('{"a":1}{"b":2}\n[3, 4] "x"')) == [{"a": 1}, {"b": 2}, [3, 4], "x"]


def test_invalid_input_still_raises():
    with pytest.raises(json.JSONDecodeError):
        split_leading_json("nope")
