"""The default tokenizer: identifier splitting, lowercasing, stopwords, digits."""

from __future__ import annotations

import random

import pytest

from retrieval_pipeline.core.retrieval.engines.tokenize import STOPWORDS, split_camel, tokenize


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("OrderedDict", ["ordered", "dict", "ordereddict"]),
        ("os.path.join", ["os", "path", "join"]),
        ("max_length", ["max", "length"]),
        ("__init__", ["init"]),
        ("HTTPServer", ["http", "server", "httpserver"]),
        ("XMLHttpRequest", ["xml", "http", "request", "xmlhttprequest"]),
        ("Float64Array", ["float64", "array", "float64array"]),
        ("getURLs", ["get", "urls", "geturls"]),
        ("URLs and IDs", ["urls", "ids"]),
        ("isEmpty", ["empty", "isempty"]),
        ("collections.OrderedDict(a=1)", ["collections", "ordered", "dict", "ordereddict", "1"]),
        ("Python 3.12 released in 2023", ["python", "3", "12", "released", "2023"]),
        ("sha256 utf-8", ["sha256", "utf", "8"]),
        ("The Quick BROWN fox", ["quick", "brown", "fox"]),
        ("Straße naïveTest", ["straße", "naïve", "test", "naïvetest"]),
        ("", []),
        ("the of and", []),
        ("  ,;:!?  ", []),
    ],
)
def test_tokenize_examples(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_stopwords_are_a_small_lowercase_constant() -> None:
    assert isinstance(STOPWORDS, frozenset)
    assert 20 <= len(STOPWORDS) <= 100
    assert all(word == word.lower() and word.isalpha() for word in STOPWORDS)
    assert {"the", "a", "of"} <= STOPWORDS


def test_split_camel_preserves_case_and_no_boundary_is_identity() -> None:
    assert split_camel("OrderedDict") == ["Ordered", "Dict"]
    assert split_camel("lowercase") == ["lowercase"]
    assert split_camel("ABC") == ["ABC"]


def test_concatenation_is_token_concatenation() -> None:
    """The prose fast path and the identifier path agree: text parts tokenize independently."""
    rng = random.Random(0)
    words = ["OrderedDict", "os.path", "the", "HTTPServer", "value", "x2", "getURLs", "A", "snake_case", "3.5"]
    for _ in range(300):
        left = " ".join(rng.choices(words, k=rng.randint(0, 5)))
        right = " ".join(rng.choices(words, k=rng.randint(0, 5)))
        assert tokenize(f"{left} {right}") == tokenize(left) + tokenize(right)


def test_deterministic_and_lowercase() -> None:
    text = "The DataFrame.groupBy() method returns a GroupBy object; see pandas.core.groupby."
    first = tokenize(text)
    assert first == tokenize(text)
    assert all(token == token.lower() and token for token in first)
    assert "groupby" in first and "group" in first and "dataframe" in first
