"""Report the most frequent words in a piece of text."""

from collections import Counter

PUNCTUATION = ".,!?;:\"'()[]"


def normalize(text: str) -> list[str]:
    """Lower-case the text and split it into words without surrounding punctuation."""
    words = (word.strip(PUNCTUATION) for word in text.lower().split())
    return [word for word in words if word]


def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
    """Return the ``n`` most common words with their counts, most frequent first."""
    counts = Counter(normalize(text))
    return counts.most_common(n)
