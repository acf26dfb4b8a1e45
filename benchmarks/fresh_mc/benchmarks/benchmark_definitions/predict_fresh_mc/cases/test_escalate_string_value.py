from google.adk.events import EventActions


# --8<-- [start:escalate_string_value]
def code_under_test():
    actions = EventActions(escalate="yes")
    print(repr(actions.escalate))
    return actions


# --8<-- [end:escalate_string_value]


def test_escalate_string_value():
    """Expected: pydantic's lax bool parsing turns "yes" into True."""
    assert code_under_test().escalate is True
