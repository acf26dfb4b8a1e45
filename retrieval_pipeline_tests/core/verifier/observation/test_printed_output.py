"""What a snippet printed or returned, read as text (kind of claim: a text the code prints or returns)."""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.verifier.observation.printed_output import decide_printed, listed_values


def ran(stdout: str = "", returned: str | None = None) -> dict:
    """An observation of a run that raised nothing."""
    value = {"type": "str", "literal": True, "repr": repr(returned)} if returned is not None else None
    return {"raised": None, "stdout": stdout, "returned": value}


def output(text: str, **marks: bool) -> dict:
    return {"outcome": "output", "output_text": text, **marks}


@pytest.mark.parametrize(
    ("option", "values", "comment"),
    [
        ("`0`, `1`, then `[0, 1]`.", ["0", "1", "[0, 1]"], ""),
        ("`0`, `0`, then `[0]`: the second save replaces the first.", ["0", "0", "[0]"], "the second save replaces the first."),
        ("`a` followed by `b`", ["a", "b"], ""),
        ("`'x'`", ["x"], ""),
        ("`{'k': 40}` twice.", ["{'k': 40}", "{'k': 40}"], ""),
        ("`a`, then `b` 3 times", ["a", "b", "b", "b"], ""),
    ],
)
def test_values_written_out_in_backticks_are_read_as_a_list(option, values, comment) -> None:
    assert listed_values(option) == (values, comment)


@pytest.mark.parametrize("option", ["It prints `a` twice", "The `name` field is missing", "plain text", "`x` is `1`"])
def test_an_option_that_is_more_than_values_is_not_a_list(option) -> None:
    assert listed_values(option) is None


def test_printed_values_are_compared_line_by_line_in_order() -> None:
    seen = ran("0\n1\n[0, 1]\n")
    assert decide_printed(output("`0`, `1`, then `[0, 1]`."), seen)[0] == "true"
    assert decide_printed(output("`1`, `2`, then `[1, 2]`."), seen)[0] == "false"
    assert decide_printed(output("`0`, `0`, then `[0]`: the second save replaces the first."), seen)[0] == "false"
    assert decide_printed(output("`0`, then `ValueError: Artifact memo.txt already exists.`"), seen)[0] == "false"
    assert decide_printed(output("`1`, then `[0, 1]`"), seen)[0] == "consistent"  # some of the lines, in order
    assert decide_printed(output("`[0, 1]`, then `0`"), seen)[0] == "false"  # out of order
    # right values with a comment: the comment is a claim of its own
    assert decide_printed(output("`0`, `1`, then `[0, 1]`: each save adds a version."), seen)[0] == "consistent"


def test_a_value_printed_twice_is_two_lines() -> None:
    seen = ran("{'cart_total': 40}\n{'cart_total': 40}\n")
    assert decide_printed(output("`{'cart_total': 40}` twice."), seen)[0] == "true"
    assert decide_printed(output("`{'temp:step': 2, 'cart_total': 40}`, then `{'cart_total': 40}`."), seen)[0] == "false"
    assert decide_printed(output("`{'cart_total': 40}` three times."), seen)[0] == "false"


def test_an_option_with_no_key_term_and_no_values_is_undecided_not_false() -> None:
    # the key-term reading drops numbers under three digits and brackets: "0 1 [0, 1]" has no key term
    assert decide_printed(output("0 1"), ran("0\n1\n[0, 1]\n"))[0] == "undecided"


def test_the_whole_output_is_true_and_part_of_it_is_left_to_the_caller() -> None:
    seen = ran("<lambda>\n")
    assert decide_printed(output("<lambda>"), seen)[0] == "true"
    assert decide_printed(output("`<lambda>`"), seen)[0] == "true"
    assert decide_printed(output("lambda"), seen) is None  # part of it: the caller makes it consistent at most
    assert decide_printed(output("hello world."), ran(returned="Hello  world")) is None  # case counts: not the whole
    assert decide_printed(output("Hello world."), ran(returned="Hello  world"))[0] == "true"  # the returned string


def test_a_substring_question_is_left_to_the_word_for_word_reading() -> None:
    assert decide_printed(output("`1`", substring=True), ran("0\n1\n")) is None


def test_what_a_no_error_option_says_is_printed_or_returned_is_compared() -> None:
    from retrieval_pipeline.core.verifier.observation.printed_output import decide_rest

    printed_none = {"raised": None, "stdout": "None\n", "returned": {"type": "NoneType", "literal": True, "repr": "None"}}
    assert decide_rest("it prints `None`.", printed_none)[0] == "true"
    assert decide_rest("it prints `'yes'`.", printed_none)[0] == "false"
    assert decide_rest("it prints `None`, because the value is not a boolean.", printed_none)[0] == "consistent"
    printed_true = {**printed_none, "stdout": "True\n"}
    assert decide_rest("it prints `None`, because the value is not a boolean.", printed_true)[0] == "false"
    assert decide_rest("it returns `None`", printed_none)[0] == "true"
    assert decide_rest("it returns `'x'`", ran(returned="x"))[0] == "true"
    # prose, or values and more: not read
    assert decide_rest("it creates and prints a new empty session with that id.", printed_none) is None
    assert decide_rest("it prints `f`, and `ctx` is listed as required", printed_none) is None
    assert decide_rest("the second agent will be ignored.", printed_none) is None


def test_a_returned_object_is_compared_with_a_value_written_as_code_only_through_its_enum_repr() -> None:
    """Kind of claim: what a call returns, written as code. An enum member's repr (``<WriteMode.ALLOWED: 'allowed'>``)
    names the member the option writes (``WriteMode.ALLOWED``); read as text the two differed, and a right "No error;
    it returns `WriteMode.ALLOWED`" was false. Any other object's repr is no text to compare with code: undecided."""
    from retrieval_pipeline.core.verifier.observation.printed_output import decide_rest

    member = {"raised": None, "stdout": "", "returned": {"type": "WriteMode", "literal": False, "repr": "<WriteMode.ALLOWED: 'allowed'>"}}
    assert decide_rest("it returns `WriteMode.ALLOWED`", member)[0] == "true"
    assert decide_rest("it returns `WriteMode.BLOCKED`", member)[0] == "false"
    assert decide_rest("it returns `'allowed'`", member)[0] == "undecided"  # a str enum's member equals its value
    assert decide_rest("it returns `3`", ran(returned="x"))[0] == "false"  # literals are compared as before
    agent = {"raised": None, "stdout": "", "returned": {"type": "LlmAgent", "literal": False, "repr": "LlmAgent(name='a', model='m')"}}
    assert decide_rest("it returns `root_agent`", agent)[0] == "undecided"


def test_a_no_error_option_that_says_what_is_printed_is_decided_through_the_snippet_claim() -> None:
    from retrieval_pipeline.core.verifier.observation.snippet_decisions import decide_option

    runs = {"outcome": "runs", "rest": "it prints `None`."}
    seen = {"raised": None, "stdout": "None\n", "returned": {"type": "NoneType", "literal": True, "repr": "None"}}
    assert decide_option(runs, seen)[0] == "true"
    assert decide_option({"outcome": "runs", "rest": "it prints `'yes'`."}, seen)[0] == "false"
    assert decide_option({"outcome": "runs", "rest": "the session is kept."}, seen)[0] == "consistent"
