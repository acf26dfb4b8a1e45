from fixed import closest, edit_distance


def test_known_distances():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3
    assert edit_distance("same", "same") == 0


def test_subproblems_are_reused():
    edit_distance.cache_clear()
    edit_distance("flaw", "lawn")
    assert edit_distance.cache_info().hits > 0


def test_long_words():
    assert edit_distance("internationalization", "internationalisation") == 1


def test_closest():
    assert closest("pritn", ["print", "paint", "sprint"]) == "print"
