"""Snippets for the "predict runtime behaviour" sample questions (multiple_choice.yaml, code_snippet_ref).

Each section is cut out by its mkdocs-snippets markers and run on its own; this file is never imported.
"""


def sections():
    # --8<-- [start:defaultdict_counts]
    from collections import defaultdict

    counts = defaultdict(int)
    for word in "a b a c a".split():
        counts[word] += 1
    # --8<-- [end:defaultdict_counts]

    # --8<-- [start:chain_print]
    from itertools import chain

    print(list(chain([1, 2], [3])))
    # --8<-- [end:chain_print]

    # --8<-- [start:stack_pop]
    stack = [1, 2, 3]
    top = stack.pop()
    # --8<-- [end:stack_pop]

    # --8<-- [start:insort_position]
    import bisect

    scores = [10, 20, 30]
    bisect.insort(scores, 20)
    position = bisect.bisect_right(scores, 20)
    # --8<-- [end:insort_position]
