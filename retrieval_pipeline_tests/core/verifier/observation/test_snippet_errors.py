"""Options that blame one field for a snippet's error, read from made-up questions and decided against made-up
observations (pydantic's per-field errors, a ``TypeError``), with no sandbox."""

from __future__ import annotations

import pydantic
import pytest

from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.observation.snippet_decisions import decide_options
from retrieval_pipeline.core.verifier.observation.snippet_errors import decide_field_error, field_error_details, line_errors
from retrieval_pipeline.core.verifier.sandbox_side import observe_snippet

WHY = "Why does constructing this `Order` fail?"


@pytest.mark.parametrize(
    ("option", "field", "category"),
    [
        ("The `quantity` field is missing.", "quantity", "missing"),
        ("`quantity` is required.", "quantity", "missing"),
        ("The `colour` argument is not a valid field for Order.", "colour", "extra"),
        ("The `colour` keyword is not permitted.", "colour", "extra"),
        ("The `items` field must be a list.", "items", "type"),
        ("The `price` parameter must be an integer.", "price", "type"),
        ("The `owner` field cannot be inferred.", "owner", None),
    ],
)
def test_an_option_that_blames_a_field_is_read(option, field, category):
    details = field_error_details(option, WHY)
    assert details is not None and (details["field"], details["category"]) == (field, category)


@pytest.mark.parametrize(
    ("option", "question"),
    [
        ("The `quantity` field is missing.", "What does the order hold after this runs?"),  # no error presupposed
        ("Set `quantity` and `price`.", WHY),  # two fields
        ("The `quantity` field is not missing.", WHY),  # negated
        ("Use `quantity` instead.", WHY),  # says nothing of the field
        ("The order is empty.", WHY),  # names no field
    ],
)
def test_other_options_are_not_field_errors(option, question):
    assert field_error_details(option, question) is None


def pydantic_error(*errors: tuple[str, str, str], count: int | None = None) -> dict:
    listed = [{"loc": [loc] if loc else [], "type": kind, "msg": msg} for loc, kind, msg in errors]
    return {"type": "ValidationError", "mro": ["ValidationError", "ValueError", "Exception"], "message": "validation errors for Order",
            "errors": listed, "error_count": len(listed) if count is None else count}  # fmt: skip


ORDER_ERRORS = pydantic_error(
    ("quantity", "missing", "Field required"),
    ("colour", "extra_forbidden", "Extra inputs are not permitted"),
    ("items", "dict_type", "Input should be a valid dictionary"),
)


@pytest.mark.parametrize(
    ("option", "state"),
    [
        ("The `quantity` field is missing.", "true"),
        ("The `colour` argument is not a valid field for Order.", "true"),
        ("The `colour` field is missing.", "false"),  # the error at colour is another one
        ("The `items` field must be a list.", "false"),  # the error at items asks for a dictionary
        ("The `items` field must be a dict.", "true"),
        ("The `price` field must be an integer.", "false"),  # no error concerns price, and every error is listed
        ("The `quantity` field cannot be inferred.", "consistent"),  # an error concerns it; the reason is prose
    ],
)
def test_a_field_error_is_decided_against_the_per_field_errors(option, state):
    details = field_error_details(option, WHY)
    assert details is not None
    assert decide_field_error(details, ORDER_ERRORS, "raises ValidationError")[0] == state


def test_nothing_raised_decides_no_field_error():
    """The premise fails: a field "not valid" may be one the class silently ignores, true yet no error's cause."""
    for option in ("The `quantity` field is missing.", "The `colour` argument is not a valid field for Order."):
        state, why = decide_field_error(field_error_details(option, WHY), None, "runs without an exception")
        assert state == "undecided" and "presupposes" in why


def test_absence_is_no_disproof_when_the_list_may_be_incomplete():
    details = field_error_details("The `price` field must be an integer.", WHY)
    cut = pydantic_error(("quantity", "missing", "Field required"), count=25)  # more errors than were kept
    assert decide_field_error(details, cut, "raises")[0] == "undecided"
    model_level = pydantic_error(("quantity", "missing", "Field required"), ("", "value_error", "Value error, totals do not add up"))
    assert decide_field_error(details, model_level, "raises")[0] == "undecided"  # a model-level rule may concern price
    naming = pydantic_error(("", "value_error", "Value error, price and quantity disagree"))
    assert decide_field_error(details, naming, "raises")[0] == "consistent"  # it names price; its kind is not read
    no_fields = {"type": "RuntimeError", "mro": ["RuntimeError", "Exception"], "message": "boom", "errors": []}
    assert decide_field_error(details, no_fields, "raises")[0] == "undecided"


def test_a_type_error_names_one_keyword_and_so_proves_no_absence():
    unexpected = {"type": "TypeError", "mro": ["TypeError", "Exception"], "errors": [],
                  "message": "Order.__init__() got an unexpected keyword argument 'colour'"}  # fmt: skip
    errors, complete = line_errors(unexpected)
    assert [e["loc"] for e in errors] == [["colour"]] and complete is False
    extra = field_error_details("The `colour` argument is not accepted.", WHY)
    assert decide_field_error(extra, unexpected, "raises")[0] == "true"
    assert decide_field_error(field_error_details("The `quantity` field is missing.", WHY), unexpected, "raises")[0] == "undecided"
    missing = {"type": "TypeError", "mro": ["TypeError", "Exception"], "errors": [],
               "message": "Order.__init__() missing 2 required positional arguments: 'quantity' and 'price'"}  # fmt: skip
    assert [e["loc"] for e in line_errors(missing)[0]] == [["quantity"], ["price"]]


def test_field_error_options_of_a_snippet_question_are_snippet_claims_decided_with_the_others():
    options = {
        "A": "The `quantity` field is missing.",
        "B": "The `price` field must be a list.",
        "C": "No error.",
        "D": "None of the above",
    }
    claims = [c for c in decompose("c", WHY, options, snippet="x = 1\n") if c.kind == "snippet"]
    assert [c.details["outcome"] for c in claims] == ["field_error", "field_error", "runs"]
    observation = {"stage": "done", "raised": ORDER_ERRORS, "returned": None, "stdout": "", "called": "code_under_test",
                   "context_failures": [], "expressions": {}}  # fmt: skip
    assert [state for state, _ in decide_options(claims, observation)] == ["true", "false", "false"]


def test_the_observer_records_every_per_field_error_and_their_count():
    class Order(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        quantity: int

    with pytest.raises(pydantic.ValidationError) as caught:
        Order(colour="red")
    described = observe_snippet.describe_exception(caught.value)
    assert described["error_count"] == 2 and len(described["errors"]) == 2
    assert line_errors(described) == (described["errors"], True)
    assert observe_snippet.describe_exception(ValueError("x"))["error_count"] is None
