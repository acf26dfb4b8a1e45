import os

from fixed import merge_sorted_chunks


def test_merges_and_sorts():
    lines, _ = merge_sorted_chunks([["pear", "apple"], ["fig"], ["banana", "cherry"]])
    assert lines == ["apple", "banana", "cherry", "fig", "pear"]


def test_scratch_directory_is_removed():
    _, scratch_dir = merge_sorted_chunks([["b", "a"]])
    assert scratch_dir
    assert not os.path.exists(scratch_dir)


def test_no_chunks():
    lines, scratch_dir = merge_sorted_chunks([])
    assert lines == []
    assert not os.path.exists(scratch_dir)
