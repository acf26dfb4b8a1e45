"""Levenshtein distance for short identifiers, used to suggest typo fixes."""

import functools


@functools.lru_cache(maxsize=4096)
def edit_distance(a: str, b: str) -> int:
    """Minimum number of single-character inserts, deletes or substitutions."""
    if not a:
        return len(b)
    if not b:
        return len(a)
    if a[0] == b[0]:
        return edit_distance(a[1:], b[1:])
    return 1 + min(
        edit_distance(a[1:], b),
        edit_distance(a, b[1:]),
        edit_distance(a[1:], b[1:]),
    )


def closest(word: str, candidates: list[str]) -> str:
    return min(candidates, key=lambda candidate: edit_distance(word, candidate))
