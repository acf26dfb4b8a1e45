from fixed import top_words


def test_counts_words_not_characters():
    assert top_words("the cat and the hat", 1) == [("the", 2)]


def test_ignores_case_and_punctuation():
    assert top_words("Spam, spam! Eggs.", 2) == [("spam", 2), ("eggs", 1)]


def test_default_returns_three():
    assert len(top_words("a b c d e f")) == 3


def test_empty_text():
    assert top_words("") == []
