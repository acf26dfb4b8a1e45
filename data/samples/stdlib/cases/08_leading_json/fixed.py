"""Read JSON documents that arrive glued together in one string (e.g. a log stream)."""

import json

_decoder = json.JSONDecoder()


def split_leading_json(text: str):
    """Parse the JSON value at the start of ``text``; return ``(value, remaining_text)``."""
    stripped = text.lstrip()
    value, end = _decoder.raw_decode(stripped)
    return value, stripped[end:]


def iter_documents(text: str):
    """Yield every JSON value in a string of back-to-back JSON documents."""
    rest = text
    while rest.strip():
        value, rest = split_leading_json(rest)
        yield value
